package services

import (
	"fmt"
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/axsched/ax/services/internal/keys"
	"github.com/axsched/ax/services/internal/store"
)

// TestSecurityDocMatchesTheCode keeps the grants and the Redis ACL rules
// docs/security.md tells operators to use equal to what the code needs,
// and the schema window docs/operations.md promises equal to the code's.
func TestSecurityDocMatchesTheCode(t *testing.T) {
	doc, err := os.ReadFile("../docs/security.md")
	require.NoError(t, err)
	for _, want := range []string{
		store.GrantStatement(store.MigratePrivileges, "ax", "'ax_migrate'@'%'"),
		store.GrantStatement(store.ServicePrivileges, "ax", "'ax'@'%'"),
		keys.New("ax").ACLLine(),
	} {
		require.Contains(t, string(doc), want, "docs/security.md is out of date")
	}
	ops, err := os.ReadFile("../docs/operations.md")
	require.NoError(t, err)
	require.Contains(t, string(ops), fmt.Sprintf("up to **%d versions newer**", store.SchemaAhead),
		"docs/operations.md names the schema window store.SchemaAhead")
}
