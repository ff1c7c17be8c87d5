package contracts

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// openAPIDoc holds only the parts of the document that are compared with the
// Go code; everything else is prose for people.
type openAPIDoc struct {
	OpenAPI    string                          `yaml:"openapi"`
	Paths      map[string]map[string]yaml.Node `yaml:"paths"`
	Components struct {
		Schemas map[string]openAPISchema `yaml:"schemas"`
	} `yaml:"components"`
}

type openAPISchema struct {
	Properties map[string]yaml.Node `yaml:"properties"`
	Required   []string             `yaml:"required"`
	Enum       []string             `yaml:"enum"`
}

// loadOpenAPI parses the embedded bytes rather than the file so that the
// embedding itself is covered.
func loadOpenAPI(t *testing.T) openAPIDoc {
	t.Helper()
	var doc openAPIDoc
	if err := yaml.Unmarshal(OpenAPI, &doc); err != nil {
		t.Fatalf("parse openapi.yaml: %v", err)
	}
	if !strings.HasPrefix(doc.OpenAPI, "3.1.") {
		t.Fatalf("openapi.yaml declares OpenAPI %q, want 3.1.x", doc.OpenAPI)
	}
	return doc
}

// jsonFields returns the wire names of a struct's fields as encoding/json
// sees them, and those without omitempty, which are therefore always sent.
func jsonFields(t *testing.T, typ reflect.Type) (names, always []string) {
	t.Helper()
	for f := range typ.Fields() {
		if !f.IsExported() {
			continue
		}
		tag := f.Tag.Get("json")
		if f.Anonymous && tag == "" && f.Type.Kind() == reflect.Struct {
			// encoding/json lifts an untagged embedded struct's fields.
			n, a := jsonFields(t, f.Type)
			names, always = append(names, n...), append(always, a...)
			continue
		}
		if f.Anonymous {
			t.Fatalf("%s embeds %s with a tag or by pointer: flatten it or teach this test about it", typ, f.Type)
		}
		if tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if name == "" {
			name = f.Name
		}
		names = append(names, name)
		if !slices.Contains(strings.Split(opts, ","), "omitempty") {
			always = append(always, name)
		}
	}
	slices.Sort(names)
	slices.Sort(always)
	return names, always
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}

func stringsOf[S ~string](values []S) []string {
	out := make([]string, len(values))
	for i, v := range values {
		out[i] = string(v)
	}
	return out
}

// TestOpenAPISchemasMatchGoTypes keeps each schema's properties equal to the
// Go struct's JSON fields, and its required list equal to the fields that are
// always sent, so a field added, renamed or made optional on one side fails
// here until the other side follows.
func TestOpenAPISchemasMatchGoTypes(t *testing.T) {
	doc := loadOpenAPI(t)
	tests := []struct {
		schema string
		goType reflect.Type
	}{
		{"SubmitRequest", reflect.TypeFor[SubmitRequest]()},
		{"Task", reflect.TypeFor[Task]()},
		{"HistoryEntry", reflect.TypeFor[HistoryEntry]()},
		{"History", reflect.TypeFor[History]()},
		{"TaskList", reflect.TypeFor[TaskList]()},
		{"TaskProgress", reflect.TypeFor[TaskProgress]()},
		{"Stats", reflect.TypeFor[Stats]()},
		{"BulkFilter", reflect.TypeFor[BulkFilter]()},
		{"BulkRequest", reflect.TypeFor[BulkRequest]()},
		{"BulkResult", reflect.TypeFor[BulkResult]()},
		{"TypeStats", reflect.TypeFor[TypeStats]()},
		{"LaneStats", reflect.TypeFor[LaneStats]()},
		{"TaskType", reflect.TypeFor[TaskType]()},
		{"TaskTypeList", reflect.TypeFor[TaskTypeList]()},
		{"TaskTypeUpdate", reflect.TypeFor[TaskTypeUpdate]()},
		{"BatchRequest", reflect.TypeFor[BatchRequest]()},
		{"BatchItemResult", reflect.TypeFor[BatchItemResult]()},
		{"BatchResponse", reflect.TypeFor[BatchResponse]()},
		{"DeadLetter", reflect.TypeFor[DeadLetter]()},
		{"DeadLetterList", reflect.TypeFor[DeadLetterList]()},
		{"Node", reflect.TypeFor[Node]()},
		{"NodeList", reflect.TypeFor[NodeList]()},
		{"Problem", reflect.TypeFor[Problem]()},
		{"APIKey", reflect.TypeFor[APIKey]()},
		{"APIKeyList", reflect.TypeFor[APIKeyList]()},
		{"APIKeyCreate", reflect.TypeFor[APIKeyCreate]()},
		{"APIKeyCreated", reflect.TypeFor[APIKeyCreated]()},
		{"TaskOrigin", reflect.TypeFor[TaskOrigin]()},
		{"TaskTemplate", reflect.TypeFor[TaskTemplate]()},
		{"ScheduleRequest", reflect.TypeFor[ScheduleRequest]()},
		{"Schedule", reflect.TypeFor[Schedule]()},
		{"ScheduleList", reflect.TypeFor[ScheduleList]()},
		{"StepTask", reflect.TypeFor[StepTask]()},
		{"WorkflowStep", reflect.TypeFor[WorkflowStep]()},
		{"WorkflowRequest", reflect.TypeFor[WorkflowRequest]()},
		{"WorkflowStepState", reflect.TypeFor[WorkflowStepState]()},
		{"Workflow", reflect.TypeFor[Workflow]()},
		{"WorkflowSummary", reflect.TypeFor[WorkflowSummary]()},
		{"WorkflowListItem", reflect.TypeFor[WorkflowListItem]()},
		{"WorkflowList", reflect.TypeFor[WorkflowList]()},
		{"LineageAttempt", reflect.TypeFor[LineageAttempt]()},
		{"LineageTask", reflect.TypeFor[LineageTask]()},
		{"LineageEdge", reflect.TypeFor[LineageEdge]()},
		{"Lineage", reflect.TypeFor[Lineage]()},
		{"LineageList", reflect.TypeFor[LineageList]()},
		{"Caller", reflect.TypeFor[Caller]()},
		{"RolloutRequest", reflect.TypeFor[RolloutRequest]()},
		{"RolloutGuard", reflect.TypeFor[RolloutGuard]()},
		{"Rollout", reflect.TypeFor[Rollout]()},
		{"VersionStats", reflect.TypeFor[VersionStats]()},
		{"RolloutVerdict", reflect.TypeFor[RolloutVerdict]()},
		{"RolloutLog", reflect.TypeFor[RolloutLog]()},
	}
	for _, tt := range tests {
		t.Run(tt.schema, func(t *testing.T) {
			s, ok := doc.Components.Schemas[tt.schema]
			if !ok {
				t.Fatalf("openapi.yaml has no schema %s", tt.schema)
			}
			names, always := jsonFields(t, tt.goType)
			if got := sortedKeys(s.Properties); !slices.Equal(got, names) {
				t.Errorf("schema %s properties = %v, want the json names of %s: %v", tt.schema, got, tt.goType, names)
			}
			if got := sorted(s.Required); !slices.Equal(got, always) {
				t.Errorf("schema %s required = %v, want the fields of %s without omitempty: %v", tt.schema, got, tt.goType, always)
			}
		})
	}
}

// TestOpenAPIEnums keeps the documented values equal to the code's. Status
// and Priority are compared in order because their order means something
// (stable listing, serve order); error codes are compared as a set.
func TestOpenAPIEnums(t *testing.T) {
	doc := loadOpenAPI(t)
	// Written out by hand because Go cannot enumerate constants: a new Code*
	// constant must be added here and to the document.
	codes := []string{
		CodeMalformedJSON,
		CodeInvalidArgument,
		CodeUnknownType,
		CodePayloadTooLarge,
		CodeNotFound,
		CodeIllegalTransition,
		CodeInternal,
		CodeUnavailable,
		CodeMethodNotAllowed,
		CodeUnsupportedMediaType,
		CodeRateLimited,
		CodeMisdirectedRequest,
		CodeOriginNotAllowed,
		CodeUnauthenticated,
		CodeForbidden,
		CodeConflict,
	}
	tests := []struct {
		schema  string
		want    []string
		ordered bool
	}{
		{"Status", stringsOf(Statuses), true},
		{"Priority", stringsOf(Priorities), true},
		{"ErrorCode", codes, false},
	}
	for _, tt := range tests {
		t.Run(tt.schema, func(t *testing.T) {
			s, ok := doc.Components.Schemas[tt.schema]
			if !ok {
				t.Fatalf("openapi.yaml has no schema %s", tt.schema)
			}
			got, want := s.Enum, tt.want
			if !tt.ordered {
				got, want = sorted(got), sorted(want)
			}
			if !slices.Equal(got, want) {
				t.Errorf("schema %s enum = %v, want %v", tt.schema, got, want)
			}
		})
	}
}

// TestOpenAPIRoutes lists the routes that services/submitter and
// services/internal/ops mount. contracts cannot import them, so the list is
// kept by hand; the document must describe exactly these operations.
func TestOpenAPIRoutes(t *testing.T) {
	doc := loadOpenAPI(t)
	want := []string{
		"POST /v1/tasks",
		"GET /v1/tasks",
		"GET /v1/stats",
		"POST /v1/tasks:batch",
		"POST /v1/tasks:cancel",
		"POST /v1/deadletters:retry",
		"GET /v1/tasks/{id}",
		"GET /v1/tasks/{id}/history",
		"POST /v1/tasks/{id}/cancel",
		"GET /v1/types",
		"GET /v1/types/{name}",
		"PUT /v1/types/{name}",
		"GET /v1/types/{name}/rollout",
		"PUT /v1/types/{name}/rollout",
		"POST /v1/types/{name}/rollout/{action}",
		"GET /v1/deadletters",
		"POST /v1/deadletters/{id}/retry",
		"GET /v1/nodes",
		"POST /v1/workflows",
		"GET /v1/workflows",
		"GET /v1/workflows/{id}",
		"POST /v1/workflows/{id}/cancel",
		"GET /v1/tasks/{id}/lineage",
		"GET /v1/lineage",
		"GET /v1/keys",
		"POST /v1/keys",
		"DELETE /v1/keys/{name}",
		"POST /v1/schedules",
		"GET /v1/schedules",
		"GET /v1/schedules/{name}",
		"PUT /v1/schedules/{name}",
		"DELETE /v1/schedules/{name}",
		"POST /v1/schedules/{name}/pause",
		"POST /v1/schedules/{name}/resume",
		"GET /livez",
		"GET /readyz",
		"GET /metrics",
		"GET /v1/whoami",
		"GET /ui/",
		"GET /ui",
		"GET /",
	}
	methods := []string{"get", "put", "post", "delete", "options", "head", "patch", "trace"}
	var got []string
	for path, item := range doc.Paths {
		for key := range item {
			if slices.Contains(methods, key) {
				got = append(got, strings.ToUpper(key)+" "+path)
			}
		}
	}
	slices.Sort(got)
	want = sorted(want)
	for _, route := range want {
		if !slices.Contains(got, route) {
			t.Errorf("openapi.yaml does not describe %s", route)
		}
	}
	for _, route := range got {
		if !slices.Contains(want, route) {
			t.Errorf("openapi.yaml describes %s, which no handler serves", route)
		}
	}
}

// TestOpenAPIRefsResolve catches a misspelt $ref, which YAML parsing alone
// accepts.
func TestOpenAPIRefsResolve(t *testing.T) {
	var root yaml.Node
	if err := yaml.Unmarshal(OpenAPI, &root); err != nil {
		t.Fatalf("parse openapi.yaml: %v", err)
	}
	var refs []string
	var walk func(n *yaml.Node)
	walk = func(n *yaml.Node) {
		if n.Kind == yaml.MappingNode {
			for i := 0; i+1 < len(n.Content); i += 2 {
				if n.Content[i].Value == "$ref" {
					refs = append(refs, n.Content[i+1].Value)
				}
			}
		}
		for _, c := range n.Content {
			walk(c)
		}
	}
	walk(&root)
	if len(refs) == 0 {
		t.Fatal("found no $ref at all; the walk is broken")
	}
	for _, ref := range refs {
		pointer, ok := strings.CutPrefix(ref, "#/")
		if !ok {
			t.Errorf("$ref %q is not local to the document", ref)
			continue
		}
		if lookup(root.Content[0], strings.Split(pointer, "/")) == nil {
			t.Errorf("$ref %q points at nothing", ref)
		}
	}
}

func lookup(n *yaml.Node, path []string) *yaml.Node {
	for _, key := range path {
		if n.Kind != yaml.MappingNode {
			return nil
		}
		var next *yaml.Node
		for i := 0; i+1 < len(n.Content); i += 2 {
			if n.Content[i].Value == key {
				next = n.Content[i+1]
				break
			}
		}
		if next == nil {
			return nil
		}
		n = next
	}
	return n
}

// TestOpenAPIEdgeResponses keeps the answers of the HTTP edge, which come
// before any handler, documented on every operation they can answer: 415
// on every state-changing one, 429 on every /v1 one.
func TestOpenAPIEdgeResponses(t *testing.T) {
	doc := loadOpenAPI(t)
	for path, item := range doc.Paths {
		if !strings.HasPrefix(path, "/v1/") {
			continue
		}
		for method, node := range item {
			var op struct {
				Responses map[string]yaml.Node `yaml:"responses"`
			}
			if method == "parameters" {
				continue
			}
			if err := node.Decode(&op); err != nil {
				t.Fatalf("%s %s: %v", method, path, err)
			}
			want := []string{"429"}
			if method != "get" {
				want = append(want, "415")
			}
			for _, status := range want {
				if _, ok := op.Responses[status]; !ok {
					t.Errorf("%s %s documents no %s answer", strings.ToUpper(method), path, status)
				}
			}
			if _, ok := op.Responses["415"]; ok && method == "get" {
				t.Errorf("GET %s documents 415, which no GET answers", path)
			}
		}
	}
}

// TestOpenAPIEveryOperationDeclaresItsSecurity: an operation either needs a
// bearer token and names the least role (x-ax-role), or is open
// (security: [] and x-ax-role: none). services/submitter calls every
// operation with every role against the server and checks the answers.
func TestOpenAPIEveryOperationDeclaresItsSecurity(t *testing.T) {
	var doc struct {
		Paths      map[string]map[string]yaml.Node `yaml:"paths"`
		Components struct {
			SecuritySchemes map[string]struct {
				Type   string `yaml:"type"`
				Scheme string `yaml:"scheme"`
			} `yaml:"securitySchemes"`
		} `yaml:"components"`
	}
	if err := yaml.Unmarshal(OpenAPI, &doc); err != nil {
		t.Fatalf("parse openapi.yaml: %v", err)
	}
	if s := doc.Components.SecuritySchemes["bearerAuth"]; s.Type != "http" || s.Scheme != "bearer" {
		t.Fatalf("components.securitySchemes.bearerAuth = %+v, want http bearer", s)
	}
	roles := []string{"none", "submit", "read", "operate", "admin"}
	n := 0
	for path, item := range doc.Paths {
		for method, node := range item {
			if method == "parameters" {
				continue
			}
			n++
			var op struct {
				Security *[]map[string][]string `yaml:"security"`
				Role     string                 `yaml:"x-ax-role"`
			}
			if err := node.Decode(&op); err != nil {
				t.Fatalf("%s %s: %v", method, path, err)
			}
			if !slices.Contains(roles, op.Role) {
				t.Errorf("%s %s: x-ax-role %q, want one of %v", method, path, op.Role, roles)
				continue
			}
			if op.Security == nil {
				t.Errorf("%s %s declares no security", method, path)
				continue
			}
			open := len(*op.Security) == 0
			if open != (op.Role == "none") {
				t.Errorf("%s %s: security %v does not match x-ax-role %q", method, path, *op.Security, op.Role)
			}
			if !open {
				if _, ok := (*op.Security)[0]["bearerAuth"]; !ok || len(*op.Security) != 1 {
					t.Errorf("%s %s: security %v, want [bearerAuth]", method, path, *op.Security)
				}
			}
		}
	}
	if n < 17 {
		t.Fatalf("walked %d operations; the walk is broken", n)
	}
}
