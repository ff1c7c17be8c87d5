package main

import (
	"errors"
	"fmt"
	neturl "net/url"
	"os"
	"strings"

	"github.com/go-sql-driver/mysql"
	"github.com/spf13/pflag"

	"github.com/axsched/ax/services/app"
	"github.com/axsched/ax/services/internal/store"
	"github.com/axsched/ax/services/internal/tlsfiles"
)

// A secret (a password in a DSN or URL, a webhook secret, an API token)
// never comes from a flag value: every user of the machine reads those in
// the process list. It comes from an AX_* variable or from a file a flag
// names; a secret given in a flag is refused.

// errSecretInFlag says where a secret given on the command line belongs.
func errSecretInFlag(flag, env, fileFlag string) error {
	return fmt.Errorf("--%s holds a password, which every user of this machine can read in the process list: "+
		"give it in %s or in a file named by --%s instead", flag, env, fileFlag)
}

// dsnFlags are the MySQL DSN settings of every command that opens MySQL.
type dsnFlags struct {
	dsn  string
	file string
	tls  tlsfiles.Files
}

func (d *dsnFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&d.dsn, "mysql-dsn", envStr("AX_MYSQL_DSN", defaultMySQLDSN), "MySQL DSN (go-sql-driver form), without a password on the command line: a password goes in AX_MYSQL_DSN or --mysql-dsn-file [AX_MYSQL_DSN]")
	fs.StringVar(&d.file, "mysql-dsn-file", envStr("AX_MYSQL_DSN_FILE", ""), "file holding the MySQL DSN, password included; wins over --mysql-dsn [AX_MYSQL_DSN_FILE]")
	registerTLS(fs, "mysql", &d.tls)
}

// registerTLS registers the --NAME-tls-ca/cert/key flags.
func registerTLS(fs *pflag.FlagSet, name string, files *tlsfiles.Files) {
	env := "AX_" + strings.ToUpper(name) + "_TLS_"
	fs.StringVar(&files.CA, name+"-tls-ca", envStr(env+"CA", ""), "PEM file of the CA that signed "+name+"'s certificate; any --"+name+"-tls-* turns TLS on ["+env+"CA]")
	fs.StringVar(&files.Cert, name+"-tls-cert", envStr(env+"CERT", ""), "PEM client certificate for "+name+" (with --"+name+"-tls-key) ["+env+"CERT]")
	fs.StringVar(&files.Key, name+"-tls-key", envStr(env+"KEY", ""), "PEM key of the "+name+" client certificate ["+env+"KEY]")
}

// resolveTLS is resolve with the TLS settings applied to the DSN, for the
// commands that open MySQL themselves (ax migrate, ax key).
func (d *dsnFlags) resolveTLS(fs *pflag.FlagSet) (string, error) {
	dsn, err := d.resolve(fs)
	if err != nil {
		return "", err
	}
	cfg, err := d.tls.Config("mysql")
	if err != nil {
		return "", err
	}
	return store.WithTLS(dsn, cfg)
}

// resolve returns the DSN to use: the file's, else the flag's or
// variable's, refusing a password given in the flag itself.
func (d *dsnFlags) resolve(fs *pflag.FlagSet) (string, error) {
	if d.file != "" {
		return readSecretFile("mysql dsn", d.file)
	}
	if fs.Changed("mysql-dsn") {
		if cfg, err := mysql.ParseDSN(d.dsn); err == nil && cfg.Passwd != "" {
			return "", errSecretInFlag("mysql-dsn", "AX_MYSQL_DSN", "mysql-dsn-file")
		}
	}
	return d.dsn, nil
}

// readSecretFile reads a one-line secret, trimming the line end. Errors
// name the file, never its content.
func readSecretFile(what, path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("%s file: %w", what, err)
	}
	s := strings.TrimSpace(string(b))
	if s == "" {
		return "", fmt.Errorf("%s file %s is empty", what, path)
	}
	return s, nil
}

// connFlags are the credentials and TLS files of the server commands'
// connections to MySQL, Redis and NATS.
type connFlags struct {
	mysql             dsnFlags
	redisPasswordFile string
	natsPasswordFile  string
}

func (f *serverFlags) registerConn(fs *pflag.FlagSet) {
	c := &f.cfg
	f.conn.mysql.register(fs)
	fs.StringVar(&c.RedisUser, "redis-user", envStr("AX_REDIS_USER", ""), "Redis ACL user (default: the default user) [AX_REDIS_USER]")
	fs.StringVar(&f.conn.redisPasswordFile, "redis-password-file", envStr("AX_REDIS_PASSWORD_FILE", ""), "file holding the Redis password; else AX_REDIS_PASSWORD [AX_REDIS_PASSWORD_FILE]")
	fs.StringVar(&c.NATSUser, "nats-user", envStr("AX_NATS_USER", ""), "NATS user (see ax nats-config) [AX_NATS_USER]")
	fs.StringVar(&f.conn.natsPasswordFile, "nats-password-file", envStr("AX_NATS_PASSWORD_FILE", ""), "file holding the NATS password; else AX_NATS_PASSWORD [AX_NATS_PASSWORD_FILE]")
	registerTLS(fs, "redis", &c.RedisTLS)
	registerTLS(fs, "nats", &c.NATSTLS)
}

// resolveSecrets fills cfg's DSN and passwords from files and variables.
func (f *serverFlags) resolveSecrets(fs *pflag.FlagSet, cfg *app.Config) error {
	dsn, err := f.conn.mysql.resolve(fs)
	if err != nil {
		return err
	}
	cfg.MySQLDSN, cfg.MySQLTLS = dsn, f.conn.mysql.tls
	if fs.Changed("nats-url") && urlHasPassword(cfg.NATSURL) {
		return errSecretInFlag("nats-url", "AX_NATS_URL", "nats-password-file (with --nats-user)")
	}
	if cfg.RedisPassword, err = secretFrom("redis password", f.conn.redisPasswordFile, "AX_REDIS_PASSWORD"); err != nil {
		return err
	}
	if cfg.NATSPassword, err = secretFrom("nats password", f.conn.natsPasswordFile, "AX_NATS_PASSWORD"); err != nil {
		return err
	}
	if cfg.NATSPassword != "" && cfg.NATSUser == "" {
		return errors.New("a NATS password is set but no --nats-user")
	}
	return nil
}

// secretFrom reads a secret from file, else from the variable env.
func secretFrom(what, file, env string) (string, error) {
	if file != "" {
		return readSecretFile(what, file)
	}
	return os.Getenv(env), nil
}

// urlHasPassword reports whether any URL of a comma-separated list holds
// a password.
func urlHasPassword(urls string) bool {
	for _, u := range strings.Split(urls, ",") {
		if p, err := neturl.Parse(strings.TrimSpace(u)); err == nil && p.User != nil {
			if _, ok := p.User.Password(); ok {
				return true
			}
		}
	}
	return false
}
