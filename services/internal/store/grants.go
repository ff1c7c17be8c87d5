package store

import "fmt"

// ServicePrivileges are all the services need on ax's database: they read
// and change rows and never the schema, so a leaked service password
// cannot drop a table. docs/security.md gives the statements.
const ServicePrivileges = "SELECT, INSERT, UPDATE, DELETE"

// MigratePrivileges are what `ax migrate up` and `down` need: the
// services' rights (migrations move data and keep golang-migrate's
// version table) plus changing the schema. CREATE on the database also
// lets the first `ax migrate up` create it.
const MigratePrivileges = "SELECT, INSERT, UPDATE, DELETE, CREATE, ALTER, DROP, INDEX, REFERENCES"

// GrantStatement is the GRANT giving account (a quoted 'user'@'host') the
// privileges on every table of database.
func GrantStatement(privileges, database, account string) string {
	return fmt.Sprintf("GRANT %s ON `%s`.* TO %s", privileges, database, account)
}
