// Package auth decides who may call ax's HTTP API: API keys (bearer
// tokens) with a role, checked by one middleware against one route table.
//
// A key has one of four roles. read may call every route that only reads;
// submit may create tasks and read the tasks it created; operate may do
// what read and submit may, and change things (cancel, pause and resume,
// type settings, dead-letter re-runs); admin may do everything, keys
// included:
//
//	admin ⊇ operate ⊇ read
//	operate ⊇ submit
//
// Tokens are "ax_" and 52 base32 characters (32 random bytes). MySQL keeps
// only their SHA-256 (store.APIKey); a process caches what it looked up for
// CacheTTLDefault, so a revoked key stops working everywhere within that
// period, and records a key's last use at most once per TouchEveryDefault.
//
// Whether a process checks keys at all is decided once at start (Decide):
// on when keys exist or when it is bound to anything but loopback (where
// it refuses to start without a key), off only on loopback with no key,
// so that `ax up` on a laptop needs no setup.
package auth
