package auth

import (
	"fmt"
	"regexp"
	"strings"
)

// Role is what a key may do.
type Role string

// The roles, from least to most powerful (submit and read are side by side).
const (
	RoleSubmit  Role = "submit"
	RoleRead    Role = "read"
	RoleOperate Role = "operate"
	RoleAdmin   Role = "admin"
)

// Roles lists every role.
var Roles = []Role{RoleSubmit, RoleRead, RoleOperate, RoleAdmin}

// ParseRole accepts the name of a role.
func ParseRole(s string) (Role, error) {
	for _, r := range Roles {
		if string(r) == s {
			return r, nil
		}
	}
	return "", fmt.Errorf("role %q: want submit, read, operate or admin", s)
}

// grants says which route requirements each role meets; RoleSubmit's
// reads are limited to its own tasks by the handlers (Rule.OwnTasks).
var grants = map[Role][]Role{
	RoleSubmit:  {RoleSubmit},
	RoleRead:    {RoleRead},
	RoleOperate: {RoleSubmit, RoleRead, RoleOperate},
	RoleAdmin:   {RoleSubmit, RoleRead, RoleOperate, RoleAdmin},
}

// Rule is what a route requires.
type Rule struct {
	// Open routes need no key (/livez, /readyz).
	Open bool
	// Role is the least role that may call the route.
	Role Role
	// OwnTasks lets a submit key call a read route for a task it created;
	// the handler checks the ownership (Owns).
	OwnTasks bool
}

// Allows reports whether a key of role r may call the route. For a submit
// key on an OwnTasks route it says only "maybe": the handler decides.
func (ru Rule) Allows(r Role) bool {
	if ru.Open {
		return true
	}
	if ru.OwnTasks && r == RoleSubmit {
		return true
	}
	for _, g := range grants[r] {
		if g == ru.Role {
			return true
		}
	}
	return false
}

// Routes is the one table of what every route requires, keyed by the
// http.ServeMux pattern it is mounted under. A pattern missing here is
// refused to every key (deny by default); the OpenAPI document declares
// the same (x-ax-role), and a test calls every operation with every role.
var Routes = map[string]Rule{
	"GET /livez":                             {Open: true},
	"GET /readyz":                            {Open: true},
	"GET /metrics":                           {Role: RoleRead},
	"GET /{$}":                               {Open: true},
	"GET /ui":                                {Open: true},
	"GET /ui/":                               {Open: true},
	"GET /v1/whoami":                         {Role: RoleRead},
	"POST /v1/tasks":                         {Role: RoleSubmit},
	"GET /v1/tasks":                          {Role: RoleRead},
	"GET /v1/stats":                          {Role: RoleRead},
	"POST /v1/tasks:batch":                   {Role: RoleSubmit},
	"POST /v1/tasks:cancel":                  {Role: RoleOperate},
	"POST /v1/deadletters:retry":             {Role: RoleOperate},
	"GET /v1/tasks/{id}":                     {Role: RoleRead, OwnTasks: true},
	"GET /v1/tasks/{id}/history":             {Role: RoleRead, OwnTasks: true},
	"POST /v1/tasks/{id}/cancel":             {Role: RoleOperate},
	"GET /v1/types":                          {Role: RoleRead},
	"GET /v1/types/{name}":                   {Role: RoleRead},
	"PUT /v1/types/{name}":                   {Role: RoleOperate},
	"GET /v1/types/{name}/rollout":           {Role: RoleRead},
	"PUT /v1/types/{name}/rollout":           {Role: RoleOperate},
	"POST /v1/types/{name}/rollout/{action}": {Role: RoleOperate},
	"GET /v1/deadletters":                    {Role: RoleRead},
	"POST /v1/deadletters/{id}/retry":        {Role: RoleOperate},
	"GET /v1/nodes":                          {Role: RoleRead},
	"GET /v1/keys":                           {Role: RoleAdmin},
	"POST /v1/keys":                          {Role: RoleAdmin},
	"DELETE /v1/keys/{name}":                 {Role: RoleAdmin},
	"POST /v1/schedules":                     {Role: RoleOperate},
	"GET /v1/schedules":                      {Role: RoleRead},
	"GET /v1/schedules/{name}":               {Role: RoleRead},
	"PUT /v1/schedules/{name}":               {Role: RoleOperate},
	"DELETE /v1/schedules/{name}":            {Role: RoleOperate},
	"POST /v1/schedules/{name}/pause":        {Role: RoleOperate},
	"POST /v1/schedules/{name}/resume":       {Role: RoleOperate},
	"POST /v1/workflows":                     {Role: RoleSubmit},
	"GET /v1/workflows":                      {Role: RoleRead},
	"GET /v1/workflows/{id}":                 {Role: RoleRead},
	"POST /v1/workflows/{id}/cancel":         {Role: RoleOperate},
	"GET /v1/tasks/{id}/lineage":             {Role: RoleRead},
	"GET /v1/lineage":                        {Role: RoleRead},
}

var namePattern = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,63}$`)

// ValidateName checks a key name: 1 to 64 of a-z 0-9 . _ -, starting with
// a letter or digit. Names appear in history rows and logs ("key:alice via
// submitter@n1"), so they hold no spaces, slashes or capitals.
func ValidateName(name string) error {
	if !namePattern.MatchString(name) {
		return fmt.Errorf("key name %q: want 1 to 64 of a-z 0-9 . _ -, starting with a letter or digit", name)
	}
	return nil
}

// actorPrefix is how history rows name a key.
const actorPrefix = "key:"

// Actor is who an action is recorded as: "key:NAME via BASE" for a request
// made with a key, BASE (the serving process, "submitter@n1") without one.
func Actor(k *Key, base string) string {
	if k == nil {
		return base
	}
	return actorPrefix + k.Name + " via " + base
}

// WithNote adds a caller-supplied name (`?actor=`) to an actor. It is a
// note only: the key stays the actor of record.
func WithNote(actor, note string) string {
	if note == "" {
		return actor
	}
	return actor + " (note: " + note + ")"
}

// Owns reports whether creator, the actor of a task's creating history row,
// names key k.
func Owns(k *Key, creator string) bool {
	return k != nil && strings.HasPrefix(creator, actorPrefix+k.Name+" via ")
}
