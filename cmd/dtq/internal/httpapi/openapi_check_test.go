package httpapi

// A check of the server's answers against openapi.json. Every test server
// of the package (newTestServer) serves through checkAnswers, so every
// answer a test receives is held to the document: its status must be
// documented for the operation, its headers and Content-Type must be the
// documented ones, and its body must satisfy the response schema.
//
// The schema check implements the JSON Schema subset the document uses and
// refuses any other keyword, so that the document cannot silently rely on
// something unchecked. It is stricter than JSON Schema in one way: an
// object in an answer may carry only the members its schema names, unless
// the schema leaves it open (no properties, or additionalProperties).

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/big"
	"mime"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"
)

// contract is the OpenAPI document, read to check answers against it.
type contract struct {
	doc map[string]any // numbers as json.Number
	ops *http.ServeMux // one pattern per documented operation

	mu      sync.Mutex
	regexps map[string]*regexp.Regexp
}

// servedContract is the document the server serves.
var servedContract = sync.OnceValues(func() (*contract, error) { return newContract(openapiJSON) })

// newContract reads an OpenAPI document.
func newContract(data []byte) (*contract, error) {
	var doc map[string]any
	if err := decodeJSON(data, &doc); err != nil {
		return nil, fmt.Errorf("openapi.json: %w", err)
	}
	c := &contract{doc: doc, ops: http.NewServeMux(), regexps: map[string]*regexp.Regexp{}}
	paths, _ := doc["paths"].(map[string]any)
	for path, item := range paths {
		for method := range item.(map[string]any) {
			switch method {
			case "get", "put", "post", "delete", "patch", "head", "options":
				c.ops.Handle(strings.ToUpper(method)+" "+path, http.NotFoundHandler())
			}
		}
	}
	return c, nil
}

// decodeJSON decodes exactly one JSON value, keeping numbers exact.
func decodeJSON(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return errors.New("data after the JSON value")
	}
	return nil
}

// operation finds the documented operation a request reaches, the way the
// server's mux does; "" when none.
func (c *contract) operation(method, path string) (pattern string, op map[string]any) {
	r, err := http.NewRequest(method, "http://localhost"+path, nil)
	if err != nil {
		return "", nil
	}
	_, pattern = c.ops.Handler(r)
	if pattern == "" {
		return "", nil
	}
	m, p, _ := strings.Cut(pattern, " ")
	op, _ = c.pointer("#/paths/" + escapePointer(p) + "/" + strings.ToLower(m)).(map[string]any)
	return pattern, op
}

func escapePointer(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}

// pointer resolves a local JSON pointer ("#/components/schemas/Task").
func (c *contract) pointer(ref string) any {
	rest, ok := strings.CutPrefix(ref, "#")
	if !ok {
		return nil
	}
	var cur any = c.doc
	for _, tok := range strings.Split(rest, "/")[1:] {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		m, ok := cur.(map[string]any)
		if !ok {
			return nil
		}
		if cur, ok = m[tok]; !ok {
			return nil
		}
	}
	return cur
}

// deref follows an object's $ref (responses, headers, parameters).
func (c *contract) deref(v any) (map[string]any, error) {
	for range 8 {
		m, _ := v.(map[string]any)
		ref, ok := m["$ref"].(string)
		if !ok {
			return m, nil
		}
		if v = c.pointer(ref); v == nil {
			return nil, fmt.Errorf("dangling $ref %s", ref)
		}
	}
	return nil, errors.New("$ref chain too long")
}

// answer is one finished answer of the server.
type answer struct {
	method, path string // of the request; path as sent (escaped)
	status       int
	header       http.Header
	body         []byte
	bodyKept     bool // false when the body was streamed, not kept
}

// check lists how answer a departs from the document; pattern is the
// operation it was held to ("" for a path the document does not know,
// whose answer must be the error envelope).
func (c *contract) check(a answer) (pattern string, problems []string) {
	add := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	if a.header.Get("X-Request-ID") == "" {
		add("no X-Request-ID header (every answer carries one)")
	}
	pattern, op := c.operation(a.method, a.path)
	if op == nil {
		// Unknown paths and methods (and routes a test adds) are answered
		// with the error envelope.
		if a.status < 400 {
			add("status %d for a route the document does not describe", a.status)
		}
		problems = append(problems, c.checkBody(a, map[string]any{
			"application/json": map[string]any{"schema": map[string]any{"$ref": "#/components/schemas/Error"}}})...)
		return "", problems
	}
	responses, _ := op["responses"].(map[string]any)
	code := strconv.Itoa(a.status)
	raw, ok := responses[code]
	if !ok {
		raw, ok = responses[code[:1]+"XX"]
	}
	if !ok {
		raw, ok = responses["default"]
	}
	if !ok {
		add("status %d is not documented; documented: %s", a.status, strings.Join(slices.Sorted(maps.Keys(responses)), ", "))
		return pattern, problems
	}
	resp, err := c.deref(raw)
	if err != nil {
		add("response %s: %v", code, err)
		return pattern, problems
	}
	problems = append(problems, c.checkHeaders(a, resp)...)
	if a.status == http.StatusSwitchingProtocols {
		return pattern, problems // the connection now speaks another protocol
	}
	content, _ := resp["content"].(map[string]any)
	problems = append(problems, c.checkBody(a, content)...)
	return pattern, problems
}

// checkHeaders checks the documented headers of resp, and that no header
// the document describes elsewhere is sent undocumented here.
func (c *contract) checkHeaders(a answer, resp map[string]any) (problems []string) {
	add := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	documented := map[string]bool{}
	headers, _ := resp["headers"].(map[string]any)
	for name, raw := range headers {
		documented[http.CanonicalHeaderKey(name)] = true
		h, err := c.deref(raw)
		if err != nil {
			add("header %s: %v", name, err)
			continue
		}
		values := a.header.Values(name)
		if len(values) == 0 {
			if h["required"] == true {
				add("no %s header, which the document requires", name)
			}
			continue
		}
		for _, v := range values {
			var inst any = v
			if t, _ := c.resolveSchema(h["schema"])["type"].(string); t == "integer" || t == "number" {
				inst = json.Number(v)
				if _, ok := new(big.Rat).SetString(v); !ok {
					add("header %s: %q is not a number", name, v)
					continue
				}
			}
			for _, p := range c.validate(h["schema"], inst, "header "+name) {
				add("%s", p)
			}
		}
	}
	known, _ := c.pointer("#/components/headers").(map[string]any)
	for name := range known {
		if name == "X-Request-ID" || documented[http.CanonicalHeaderKey(name)] {
			continue
		}
		if len(a.header.Values(name)) > 0 {
			add("sends the %s header, which the document does not list for this answer", name)
		}
	}
	return problems
}

// resolveSchema follows a schema's $ref to the schema it names.
func (c *contract) resolveSchema(s any) map[string]any {
	m, _ := c.deref(s)
	return m
}

// checkBody checks the Content-Type and body against content, the
// response's media types (nil: the answer has no body).
func (c *contract) checkBody(a answer, content map[string]any) (problems []string) {
	add := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	if a.method == http.MethodHead {
		return nil
	}
	if len(content) == 0 {
		if len(a.body) > 0 {
			add("has a body, but the document describes none: %.200q", a.body)
		}
		return problems
	}
	ct := a.header.Get("Content-Type")
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil {
		add("Content-Type %q is not a media type; documented: %s", ct, strings.Join(slices.Sorted(maps.Keys(content)), ", "))
		return problems
	}
	media, ok := content[mt]
	if !ok {
		add("Content-Type %s is not documented; documented: %s", mt, strings.Join(slices.Sorted(maps.Keys(content)), ", "))
		return problems
	}
	if mt != "application/json" || !a.bodyKept {
		return problems
	}
	var v any
	if err := decodeJSON(a.body, &v); err != nil {
		add("body is not JSON (%v): %.200q", err, a.body)
		return problems
	}
	schema, ok := media.(map[string]any)["schema"]
	if !ok {
		return problems
	}
	return append(problems, c.validate(schema, v, "body")...)
}

// Schema keywords the validator implements, and the annotations it may
// ignore. Any other keyword in a schema is reported: a check that skipped
// it would pass answers the document forbids.
var (
	schemaKeywords = []string{"$ref", "type", "enum", "const", "properties", "required", "additionalProperties",
		"items", "minItems", "maxItems", "oneOf", "anyOf", "allOf", "format", "pattern", "minLength", "maxLength",
		"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"}
	schemaAnnotations = []string{"description", "default", "examples", "title", "deprecated", "readOnly", "writeOnly", "$comment"}
)

// validate lists how v (found at at) breaks schema.
func (c *contract) validate(schema, v any, at string) []string {
	var e evaluation
	c.eval(schema, v, at, &e, 0)
	if obj, ok := v.(map[string]any); ok && e.closed && !e.open {
		for _, k := range slices.Sorted(maps.Keys(obj)) {
			if !e.members[k] {
				e.errs = append(e.errs, fmt.Sprintf("%s: member %q is not in the document", at, k))
			}
		}
	}
	return e.errs
}

// evaluation is what the schemas applying at one place of a value found:
// the problems, and for an object the members they describe.
type evaluation struct {
	errs    []string
	members map[string]bool // described by properties
	closed  bool            // some schema lists the object's members
	open    bool            // some schema admits any member
}

func (e *evaluation) addf(format string, args ...any) {
	e.errs = append(e.errs, fmt.Sprintf(format, args...))
}

// merge takes in what a subschema applying at the same place found.
func (e *evaluation) merge(o *evaluation) {
	e.errs = append(e.errs, o.errs...)
	e.mergeMembers(o)
}

func (e *evaluation) mergeMembers(o *evaluation) {
	if e.members == nil {
		e.members = map[string]bool{}
	}
	maps.Copy(e.members, o.members)
	e.closed = e.closed || o.closed
	e.open = e.open || o.open
}

// eval applies schema to v; depth bounds $ref cycles.
func (c *contract) eval(schema, v any, at string, e *evaluation, depth int) {
	if depth > 64 {
		e.addf("%s: schema nests too deep ($ref cycle?)", at)
		return
	}
	switch s := schema.(type) {
	case bool:
		if !s {
			e.addf("%s: no value is allowed here", at)
		}
		e.open = true
		return
	case map[string]any:
		c.evalObject(s, v, at, e, depth)
	default:
		e.addf("%s: the schema is not an object but %T", at, schema)
	}
}

func (c *contract) evalObject(s map[string]any, v any, at string, e *evaluation, depth int) {
	for k := range s {
		if !slices.Contains(schemaKeywords, k) && !slices.Contains(schemaAnnotations, k) {
			e.addf("%s: the schema uses %q, which this check does not implement", at, k)
		}
	}
	if ref, ok := s["$ref"].(string); ok {
		target := c.pointer(ref)
		if target == nil {
			e.addf("%s: dangling $ref %s", at, ref)
		} else {
			c.eval(target, v, at, e, depth+1)
		}
	}
	if t, ok := s["type"]; ok {
		var types []string
		switch t := t.(type) {
		case string:
			types = []string{t}
		case []any:
			for _, x := range t {
				s, _ := x.(string)
				types = append(types, s)
			}
		}
		if !slices.ContainsFunc(types, func(t string) bool { return hasType(v, t) }) {
			e.addf("%s: %s is not of type %s", at, describe(v), strings.Join(types, " or "))
			return // the other keywords would only repeat it
		}
	}
	if enum, ok := s["enum"].([]any); ok && !slices.ContainsFunc(enum, func(x any) bool { return jsonEqual(x, v) }) {
		e.addf("%s: %s is not one of %s", at, describe(v), describe(enum))
	}
	if want, ok := s["const"]; ok && !jsonEqual(want, v) {
		e.addf("%s: %s is not %s", at, describe(v), describe(want))
	}
	for _, k := range []string{"allOf", "anyOf", "oneOf"} {
		if subs, ok := s[k].([]any); ok {
			c.evalComposition(k, subs, v, at, e, depth)
		}
	}
	switch v := v.(type) {
	case map[string]any:
		c.evalMembers(s, v, at, e)
	case []any:
		c.evalItems(s, v, at, e)
	case string:
		c.evalString(s, v, at, e)
	case json.Number:
		evalNumber(s, v, at, e)
	}
}

func (c *contract) evalComposition(kind string, subs []any, v any, at string, e *evaluation, depth int) {
	var passed []*evaluation
	var failed []string
	for i, sub := range subs {
		var se evaluation
		c.eval(sub, v, at, &se, depth+1)
		if kind == "allOf" {
			e.merge(&se)
			continue
		}
		if len(se.errs) == 0 {
			passed = append(passed, &se)
		} else {
			errs := se.errs
			if len(errs) > 3 {
				errs = append(slices.Clone(errs[:3]), fmt.Sprintf("%d more", len(se.errs)-3))
			}
			failed = append(failed, fmt.Sprintf("[%d] %s", i, strings.Join(errs, "; ")))
		}
	}
	switch {
	case kind == "allOf":
	case len(passed) == 0:
		e.addf("%s: matches none of %s: %s", at, kind, strings.Join(failed, " | "))
	case kind == "oneOf" && len(passed) > 1:
		e.addf("%s: matches %d of oneOf, not exactly one", at, len(passed))
	default:
		for _, p := range passed {
			e.mergeMembers(p)
		}
	}
}

func (c *contract) evalMembers(s map[string]any, v map[string]any, at string, e *evaluation) {
	if e.members == nil {
		e.members = map[string]bool{}
	}
	props, hasProps := s["properties"].(map[string]any)
	for _, name := range slices.Sorted(maps.Keys(props)) {
		e.members[name] = true
		if mv, ok := v[name]; ok {
			e.errs = append(e.errs, c.validate(props[name], mv, at+"."+name)...)
		}
	}
	if req, ok := s["required"].([]any); ok {
		for _, r := range req {
			if name, _ := r.(string); name != "" {
				if _, ok := v[name]; !ok {
					e.addf("%s: required member %q is missing", at, name)
				}
			}
		}
	}
	add, hasAdd := s["additionalProperties"]
	switch {
	case hasAdd && add == false:
		e.closed = true
		for _, k := range slices.Sorted(maps.Keys(v)) {
			if _, ok := props[k]; !ok {
				e.addf("%s: member %q is not allowed", at, k)
			}
		}
	case hasAdd:
		e.open = true
		for _, k := range slices.Sorted(maps.Keys(v)) {
			if _, ok := props[k]; !ok {
				e.errs = append(e.errs, c.validate(add, v[k], at+"."+k)...)
			}
		}
	case hasProps:
		e.closed = true
	}
}

func (c *contract) evalItems(s map[string]any, v []any, at string, e *evaluation) {
	if n, ok := intKeyword(s, "minItems"); ok && int64(len(v)) < n {
		e.addf("%s: %d items, fewer than %d", at, len(v), n)
	}
	if n, ok := intKeyword(s, "maxItems"); ok && int64(len(v)) > n {
		e.addf("%s: %d items, more than %d", at, len(v), n)
	}
	if items, ok := s["items"]; ok {
		for i, x := range v {
			e.errs = append(e.errs, c.validate(items, x, fmt.Sprintf("%s[%d]", at, i))...)
		}
	}
}

func (c *contract) evalString(s map[string]any, v, at string, e *evaluation) {
	n := int64(utf8.RuneCountInString(v))
	if m, ok := intKeyword(s, "minLength"); ok && n < m {
		e.addf("%s: %q is shorter than %d", at, v, m)
	}
	if m, ok := intKeyword(s, "maxLength"); ok && n > m {
		e.addf("%s: %.80q is longer than %d", at, v, m)
	}
	if p, ok := s["pattern"].(string); ok {
		re, err := c.compiled(p)
		switch {
		case err != nil:
			e.addf("%s: pattern %q does not compile: %v", at, p, err)
		case !re.MatchString(v):
			e.addf("%s: %q does not match %s", at, v, p)
		}
	}
	switch f, _ := s["format"].(string); f {
	case "":
	case "date-time":
		if _, err := time.Parse(time.RFC3339Nano, v); err != nil {
			e.addf("%s: %q is not an RFC 3339 date-time", at, v)
		}
	default:
		e.addf("%s: format %q is not implemented by this check", at, f)
	}
}

func (c *contract) compiled(p string) (*regexp.Regexp, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if re, ok := c.regexps[p]; ok {
		return re, nil
	}
	re, err := regexp.Compile(p)
	if err == nil {
		c.regexps[p] = re
	}
	return re, err
}

func evalNumber(s map[string]any, v json.Number, at string, e *evaluation) {
	x, ok := new(big.Rat).SetString(v.String())
	if !ok {
		e.addf("%s: %s is not a number", at, v)
		return
	}
	bound := func(k string) (*big.Rat, bool) {
		n, ok := s[k].(json.Number)
		if !ok {
			return nil, false
		}
		return new(big.Rat).SetString(n.String())
	}
	if b, ok := bound("minimum"); ok && x.Cmp(b) < 0 {
		e.addf("%s: %s is less than the minimum %s", at, v, b.RatString())
	}
	if b, ok := bound("maximum"); ok && x.Cmp(b) > 0 {
		e.addf("%s: %s is more than the maximum %s", at, v, b.RatString())
	}
	if b, ok := bound("exclusiveMinimum"); ok && x.Cmp(b) <= 0 {
		e.addf("%s: %s is not more than %s", at, v, b.RatString())
	}
	if b, ok := bound("exclusiveMaximum"); ok && x.Cmp(b) >= 0 {
		e.addf("%s: %s is not less than %s", at, v, b.RatString())
	}
}

func intKeyword(s map[string]any, k string) (int64, bool) {
	n, ok := s[k].(json.Number)
	if !ok {
		return 0, false
	}
	i, err := n.Int64()
	return i, err == nil
}

// hasType reports whether v is of the JSON Schema type t.
func hasType(v any, t string) bool {
	switch v := v.(type) {
	case nil:
		return t == "null"
	case bool:
		return t == "boolean"
	case string:
		return t == "string"
	case []any:
		return t == "array"
	case map[string]any:
		return t == "object"
	case json.Number:
		if t == "number" {
			return true
		}
		r, ok := new(big.Rat).SetString(v.String())
		return t == "integer" && ok && r.IsInt()
	}
	return false
}

// jsonEqual compares two decoded JSON values, numbers by value.
func jsonEqual(a, b any) bool {
	switch a := a.(type) {
	case json.Number:
		bn, ok := b.(json.Number)
		if !ok {
			return false
		}
		x, ok1 := new(big.Rat).SetString(a.String())
		y, ok2 := new(big.Rat).SetString(bn.String())
		return ok1 && ok2 && x.Cmp(y) == 0
	case []any:
		bs, ok := b.([]any)
		return ok && slices.EqualFunc(a, bs, jsonEqual)
	case map[string]any:
		bm, ok := b.(map[string]any)
		return ok && maps.EqualFunc(a, bm, jsonEqual)
	default:
		return a == b
	}
}

// describe renders a value for a message, shortened.
func describe(v any) string {
	data, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	if len(data) > 120 {
		return string(data[:117]) + "..."
	}
	return string(data)
}

// answerChecker serves a handler and holds each of its answers to the
// document, failing the test on a departure. It also counts the statuses
// each operation answered with, for tests that walk the document.
type answerChecker struct {
	h http.Handler
	c *contract

	mu     sync.Mutex
	done   bool                    // the test server is closed: report no more
	seen   map[string]map[int]bool // operation pattern → statuses answered
	report func(string)            // where problems go; default t.Errorf
}

// checkAnswers wraps h so that every answer is checked against the served
// document until the test ends.
func checkAnswers(t testing.TB, h http.Handler) *answerChecker {
	t.Helper()
	c, err := servedContract()
	if err != nil {
		t.Fatal(err)
	}
	ac := &answerChecker{h: h, c: c, seen: map[string]map[int]bool{}}
	ac.report = func(s string) { t.Errorf("%s", s) }
	// Registered before the server's own cleanup, so it runs after the
	// server has closed and every answer is in.
	t.Cleanup(func() {
		ac.mu.Lock()
		defer ac.mu.Unlock()
		ac.done = true
	})
	return ac
}

// ServeHTTP implements http.Handler.
func (ac *answerChecker) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	// The mux matches the escaped path: "a%2Fb" is one segment.
	rw := &recordingWriter{ResponseWriter: w, ac: ac, method: r.Method, path: r.URL.EscapedPath()}
	defer rw.finish()
	ac.h.ServeHTTP(rw, r)
}

// statuses returns the statuses an operation answered with.
func (ac *answerChecker) statuses(pattern string) []int {
	ac.mu.Lock()
	defer ac.mu.Unlock()
	return slices.Sorted(maps.Keys(ac.seen[pattern]))
}

func (ac *answerChecker) checkAnswer(a answer) {
	pattern, problems := ac.c.check(a)
	ac.mu.Lock()
	defer ac.mu.Unlock()
	if pattern != "" {
		if ac.seen[pattern] == nil {
			ac.seen[pattern] = map[int]bool{}
		}
		ac.seen[pattern][a.status] = true
	}
	if len(problems) == 0 || ac.done {
		return
	}
	op := pattern
	if op == "" {
		op = a.method + " " + a.path + " (not in the document)"
	}
	ac.report(fmt.Sprintf("answer outside openapi.json: %s answered %d:\n  %s\n  body: %.300q",
		op, a.status, strings.Join(problems, "\n  "), a.body))
}

// requireDocumented fails t when rec, the answer to req served without a
// test server (httptest.NewRecorder), departs from the document.
func requireDocumented(t testing.TB, req *http.Request, rec *httptest.ResponseRecorder) {
	t.Helper()
	c, err := servedContract()
	if err != nil {
		t.Fatal(err)
	}
	res := rec.Result()
	_, problems := c.check(answer{method: req.Method, path: req.URL.EscapedPath(), status: res.StatusCode,
		header: res.Header, body: rec.Body.Bytes(), bodyKept: true})
	if len(problems) > 0 {
		t.Fatalf("answer outside openapi.json: %s %s answered %d:\n  %s\n  body: %.300q", req.Method, req.URL.EscapedPath(), res.StatusCode,
			strings.Join(problems, "\n  "), rec.Body.Bytes())
	}
}

// maxKeptBody bounds how much of a JSON answer is kept for the check.
const maxKeptBody = 64 << 20

// recordingWriter passes an answer through and keeps what the check
// needs: the status, the headers as sent, and the body unless it streams.
type recordingWriter struct {
	http.ResponseWriter
	ac           *answerChecker
	method, path string

	status   int
	header   http.Header
	body     bytes.Buffer
	keep     bool
	finished bool
}

func (w *recordingWriter) WriteHeader(code int) {
	if w.status == 0 && (code >= 200 || code == http.StatusSwitchingProtocols) {
		w.status = code
		w.header = w.Header().Clone()
		mt, _, _ := mime.ParseMediaType(w.header.Get("Content-Type"))
		w.keep = mt == "" || strings.HasSuffix(mt, "json")
		if code == http.StatusSwitchingProtocols {
			// The handler now owns the connection, maybe past the test.
			w.finish()
		}
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *recordingWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.WriteHeader(http.StatusOK)
	}
	if w.keep && w.body.Len()+len(b) <= maxKeptBody {
		w.body.Write(b)
	}
	return w.ResponseWriter.Write(b)
}

// Flush lets streaming answers through.
func (w *recordingWriter) Flush() {
	if w.status == 0 {
		w.WriteHeader(http.StatusOK)
	}
	_ = http.NewResponseController(w.ResponseWriter).Flush()
}

// Unwrap gives http.ResponseController the connection underneath.
func (w *recordingWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (w *recordingWriter) finish() {
	if w.finished {
		return
	}
	w.finished = true
	if w.status == 0 {
		w.status, w.header = http.StatusOK, w.Header().Clone()
	}
	w.ac.checkAnswer(answer{method: w.method, path: w.path, status: w.status, header: w.header,
		body: w.body.Bytes(), bodyKept: w.keep && w.body.Len() < maxKeptBody})
}
