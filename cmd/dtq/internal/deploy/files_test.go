package deploy

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"
)

// drainGrace is how long past DTQ_DRAIN_TIMEOUT_S a stopping worker may
// still take (it waits that long for cancelled handlers): a stop timeout
// must exceed their sum.
const drainGrace = 2 * time.Second

// yamlDocs decodes every document of a YAML file.
func yamlDocs(t *testing.T, path string) []map[string]any {
	t.Helper()
	dec := yaml.NewDecoder(bytes.NewReader([]byte(readFile(t, path))))
	var docs []map[string]any
	for {
		var d map[string]any
		err := dec.Decode(&d)
		if errors.Is(err, io.EOF) {
			return docs
		}
		require.NoError(t, err, path)
		if d != nil {
			docs = append(docs, d)
		}
	}
}

// at walks m along keys (map keys, or list indexes as numbers).
func at(t *testing.T, v any, keys ...any) any {
	t.Helper()
	for _, k := range keys {
		switch k := k.(type) {
		case string:
			m, ok := v.(map[string]any)
			require.True(t, ok, "%v is not a map", k)
			v = m[k]
		case int:
			l, ok := v.([]any)
			require.True(t, ok && k < len(l), "no item %d", k)
			v = l[k]
		}
	}
	return v
}

func strs(v any) []string {
	var out []string
	for _, x := range v.([]any) {
		out = append(out, x.(string))
	}
	return out
}

// seconds reads a duration written as "40s" or as a number of seconds.
func seconds(t *testing.T, v any) time.Duration {
	t.Helper()
	switch v := v.(type) {
	case int:
		return time.Duration(v) * time.Second
	case string:
		if n, err := strconv.Atoi(v); err == nil {
			return time.Duration(n) * time.Second
		}
		d, err := time.ParseDuration(v)
		require.NoError(t, err)
		return d
	}
	t.Fatalf("not a duration: %v", v)
	return 0
}

func TestCompose(t *testing.T) {
	t.Parallel()
	text := readFile(t, "compose.yaml")
	docs := yamlDocs(t, "compose.yaml")
	require.Len(t, docs, 1)
	services := at(t, docs[0], "services").(map[string]any)
	for _, s := range []string{"redis", "api", "worker-1", "worker-2", "prometheus", "grafana"} {
		require.Contains(t, services, s)
	}

	redisArgs := strings.Join(strs(at(t, services, "redis", "command")), " ")
	require.Contains(t, redisArgs, "--appendonly yes")
	require.Contains(t, redisArgs, "--maxmemory-policy noeviction")

	for _, s := range []string{"prometheus", "grafana"} {
		require.Equal(t, []string{"monitoring"}, strs(at(t, services, s, "profiles")), "%s is optional", s)
	}
	for name, svc := range services {
		if _, ok := svc.(map[string]any)["build"]; !ok {
			continue // not dtq
		}
		where := "compose.yaml service " + name
		checkCommand(t, where, strs(at(t, svc, "command")))
		env := at(t, svc, "environment").(map[string]any)
		for k := range env {
			checkVariable(t, where, k)
		}
		require.Equal(t, "redis://redis:6379/0", env["DTQ_REDIS_URL"], where)
		if strs(at(t, svc, "command"))[0] == "worker" {
			drain := seconds(t, env["DTQ_DRAIN_TIMEOUT_S"])
			require.Greater(t, seconds(t, at(t, svc, "stop_grace_period")), drain+drainGrace, "%s: the stop grace must outlast the drain", where)
			require.Equal(t, "0.0.0.0:9464", env["DTQ_WORKER_METRICS_ADDR"], where)
		}
	}
	require.Equal(t, "0.0.0.0:8080", at(t, services, "api", "environment", "DTQ_API_ADDR"))
	// ${…} substitutions name real settings too.
	for _, m := range regexp.MustCompile(`\$\{(\w+)`).FindAllStringSubmatch(text, -1) {
		checkVariable(t, "compose.yaml substitution", m[1])
	}
	// Mounted files exist.
	for _, s := range []string{"prometheus", "grafana"} {
		for _, v := range strs(at(t, services, s, "volumes")) {
			src, _, _ := strings.Cut(v, ":")
			_, err := os.Stat(filepath.Join(deployDir, src))
			require.NoError(t, err, "compose.yaml mounts %s", src)
		}
	}

	// Prometheus scrapes the services under the job names the alerts use.
	prom := yamlDocs(t, "prometheus/prometheus.yml")[0]
	jobs := map[string][]string{}
	for _, sc := range at(t, prom, "scrape_configs").([]any) {
		jobs[at(t, sc, "job_name").(string)] = strs(at(t, sc, "static_configs", 0, "targets"))
	}
	require.Equal(t, []string{"api:8080"}, jobs["dtq-api"])
	require.Equal(t, []string{"worker-1:9464", "worker-2:9464"}, jobs["dtq-worker"])
	require.Equal(t, "api", at(t, services, "api", "environment", "DTQ_ALLOWED_HOSTS"), "open mode answers Prometheus's Host api")
}

// unit reads a systemd unit or environment file: key=value lines, comments
// and sections skipped; repeated keys keep every value.
func unit(t *testing.T, path string) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	sc := bufio.NewScanner(strings.NewReader(readFile(t, path)))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' || line[0] == '[' {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		require.True(t, ok, "%s: %q", path, line)
		out[k] = append(out[k], v)
	}
	return out
}

func TestSystemdUnits(t *testing.T) {
	t.Parallel()
	env := unit(t, "systemd/dtq.env")
	for k := range env {
		checkVariable(t, "systemd/dtq.env", k)
	}
	drain := seconds(t, env["DTQ_DRAIN_TIMEOUT_S"][0])
	for file, command := range map[string]string{"dtq-api.service": "api", "dtq-worker@.service": "worker"} {
		path := filepath.Join("systemd", file)
		u := unit(t, path)
		checkVariablesIn(t, path, readFile(t, path))
		exec := strings.Fields(u["ExecStart"][0])
		require.Equal(t, "/usr/local/bin/dtq", exec[0], path)
		require.Equal(t, command, exec[1], path)
		checkCommand(t, path, exec[1:])
		require.Contains(t, u["EnvironmentFile"], "/etc/dtq/dtq.env", path)
		require.Equal(t, []string{"SIGTERM"}, u["KillSignal"], path)
		for k, v := range map[string]string{"NoNewPrivileges": "yes", "ProtectSystem": "strict", "ProtectHome": "yes",
			"DynamicUser": "yes", "PrivateTmp": "yes", "CapabilityBoundingSet": "", "RestrictAddressFamilies": "AF_INET AF_INET6 AF_UNIX",
			"MemoryDenyWriteExecute": "yes", "SystemCallArchitectures": "native"} {
			require.Equal(t, []string{v}, u[k], "%s: %s", path, k)
		}
		if command == "worker" {
			require.Greater(t, seconds(t, u["TimeoutStopSec"][0]), drain+drainGrace, "%s: TimeoutStopSec must outlast the drain", path)
		}
	}

	// systemd's own check, where it is installed, with ExecStart pointing
	// at the test binary (verify wants it to exist).
	sa, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Log("systemd-analyze not on PATH: systemd's own verification skipped")
		return
	}
	dir := t.TempDir()
	for _, file := range []string{"dtq-api.service", "dtq-worker@.service"} {
		text := strings.ReplaceAll(readFile(t, filepath.Join("systemd", file)), "/usr/local/bin/dtq", dtqBinary(t))
		require.NoError(t, os.WriteFile(filepath.Join(dir, file), []byte(text), 0o644))
	}
	cmd := exec.Command(sa, "verify", "dtq-api.service", "dtq-worker@1.service")
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "systemd-analyze verify:\n%s", out)
	require.Empty(t, strings.TrimSpace(string(out)), "systemd-analyze verify")
}

func TestKubernetesManifests(t *testing.T) {
	t.Parallel()
	kust := yamlDocs(t, "kubernetes/kustomization.yaml")[0]
	byKind := map[string]map[string]map[string]any{}
	for _, file := range strs(at(t, kust, "resources")) {
		for _, d := range yamlDocs(t, filepath.Join("kubernetes", file)) {
			kind, name := d["kind"].(string), at(t, d, "metadata", "name").(string)
			if byKind[kind] == nil {
				byKind[kind] = map[string]map[string]any{}
			}
			byKind[kind][name] = d
		}
	}
	shared := map[string]string{}
	for _, src := range []any{at(t, byKind["ConfigMap"]["dtq-config"], "data"), at(t, byKind["Secret"]["dtq-secrets"], "stringData")} {
		for k, v := range src.(map[string]any) {
			checkVariable(t, "kubernetes/config.yaml", k)
			shared[k] = v.(string)
		}
	}
	drain := seconds(t, shared["DTQ_DRAIN_TIMEOUT_S"])

	for name, command := range map[string]string{"dtq-api": "api", "dtq-worker": "worker"} {
		d := byKind["Deployment"][name]
		require.NotNil(t, d, "Deployment %s", name)
		where := "Deployment " + name
		podLabels := at(t, d, "spec", "template", "metadata", "labels").(map[string]any)
		require.Equal(t, podLabels, at(t, d, "spec", "selector", "matchLabels"), where)
		pod := at(t, d, "spec", "template", "spec")
		c := at(t, pod, "containers", 0)
		args := strs(at(t, c, "args"))
		require.Equal(t, command, args[0], where)
		checkCommand(t, where, args)
		env := map[string]string{}
		for k, v := range shared {
			env[k] = v
		}
		for _, e := range at(t, c, "env").([]any) {
			k := at(t, e, "name").(string)
			checkVariable(t, where, k)
			env[k] = at(t, e, "value").(string)
		}
		for _, ef := range at(t, c, "envFrom").([]any) {
			m := ef.(map[string]any)
			if r, ok := m["configMapRef"]; ok {
				require.Contains(t, byKind["ConfigMap"], at(t, r, "name"), where)
			}
			if r, ok := m["secretRef"]; ok {
				require.Contains(t, byKind["Secret"], at(t, r, "name"), where)
			}
		}

		// The probes reach the port the process listens on.
		addrVar := map[string]string{"api": "DTQ_API_ADDR", "worker": "DTQ_WORKER_METRICS_ADDR"}[command]
		_, port, ok := strings.Cut(env[addrVar], ":")
		require.True(t, ok, "%s: %s", where, addrVar)
		require.NotContains(t, env[addrVar], "127.0.0.1", "%s: the kubelet probes the pod's address", where)
		ports := map[string]string{}
		for _, p := range at(t, c, "ports").([]any) {
			ports[at(t, p, "name").(string)] = strconv.Itoa(at(t, p, "containerPort").(int))
		}
		for probe, path := range map[string]string{"readinessProbe": "/ready", "livenessProbe": "/health"} {
			require.Equal(t, path, at(t, c, probe, "httpGet", "path"), "%s %s", where, probe)
			require.Equal(t, port, ports[at(t, c, probe, "httpGet", "port").(string)], "%s %s port", where, probe)
		}

		sc := at(t, c, "securityContext")
		require.Equal(t, false, at(t, sc, "allowPrivilegeEscalation"), where)
		require.Equal(t, true, at(t, sc, "readOnlyRootFilesystem"), where)
		require.Equal(t, true, at(t, pod, "securityContext", "runAsNonRoot"), where)

		if command == "worker" {
			grace := seconds(t, at(t, pod, "terminationGracePeriodSeconds"))
			require.Greater(t, grace, drain+drainGrace, "%s: terminationGracePeriodSeconds must outlast DTQ_DRAIN_TIMEOUT_S", where)
		}

		// A Service and a PodDisruptionBudget select these pods.
		for _, kind := range []string{"Service", "PodDisruptionBudget"} {
			obj := byKind[kind][name]
			require.NotNil(t, obj, "%s %s", kind, name)
			sel := at(t, obj, "spec", "selector")
			if kind == "PodDisruptionBudget" {
				sel = at(t, sel, "matchLabels")
			}
			for k, v := range sel.(map[string]any) {
				require.Equal(t, v, podLabels[k], "%s %s selects %s", kind, name, where)
			}
		}
	}
}

func TestAlertRules(t *testing.T) {
	t.Parallel()
	ops := readFile(t, "../docs/operations.md")
	observability := readFile(t, "../docs/observability.md")
	rules := yamlDocs(t, "prometheus/alerts.yml")[0]
	seen := 0
	for _, g := range at(t, rules, "groups").([]any) {
		for _, r := range at(t, g, "rules").([]any) {
			name := at(t, r, "alert").(string)
			seen++
			require.Contains(t, []string{"warning", "critical"}, at(t, r, "labels", "severity"), name)
			url := at(t, r, "annotations", "runbook_url").(string)
			base, anchor, ok := strings.Cut(url, "#")
			require.True(t, ok, "%s: runbook_url has no anchor", name)
			require.True(t, strings.HasSuffix(base, "/docs/operations.md"), "%s: runbook_url points into docs/operations.md", name)
			require.Equal(t, strings.ToLower(name), anchor, name)
			require.True(t, strings.Contains(ops, "\n### "+name+"\n"), "docs/operations.md has no runbook section ### %s", name)
			require.NotEmpty(t, at(t, r, "annotations", "summary"), name)

			expr := at(t, r, "expr").(string)
			for _, m := range regexp.MustCompile(`\bdtq_[a-z_]+`).FindAllString(expr, -1) {
				m = strings.TrimSuffix(m, "_bucket")
				require.True(t, strings.Contains(observability, "`"+m+"`"), "%s uses %s, which docs/observability.md does not list", name, m)
			}
			require.NotContains(t, expr, "10000", "%s: DTQ_MAX_QUEUE_DEPTH comes from dtq_queue_max_depth", name)
		}
	}
	require.GreaterOrEqual(t, seen, 10)

	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Skip("promtool not on PATH (Debian package prometheus): promtool check rules and promtool test rules skipped")
	}
	for _, args := range [][]string{{"check", "rules", "alerts.yml"}, {"test", "rules", "alerts_test.yml"}} {
		cmd := exec.Command(promtool, args...)
		cmd.Dir = filepath.Join(deployDir, "prometheus")
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "promtool %s:\n%s", strings.Join(args, " "), out)
	}
}

func TestGrafanaDashboard(t *testing.T) {
	t.Parallel()
	text := readFile(t, "grafana/dtq-dashboard.json")
	var d struct {
		Inputs     []any `json:"__inputs"`
		Templating struct {
			List []struct {
				Name  string `json:"name"`
				Type  string `json:"type"`
				Query string `json:"query"`
			} `json:"list"`
		} `json:"templating"`
		Panels []struct {
			Title      string            `json:"title"`
			Datasource map[string]string `json:"datasource"`
			Targets    []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	require.NoError(t, json.Unmarshal([]byte(text), &d))
	require.Empty(t, d.Inputs, "file provisioning cannot fill __inputs")
	require.NotEmpty(t, d.Templating.List)
	ds := d.Templating.List[0]
	require.Equal(t, "datasource", ds.Name)
	require.Equal(t, "datasource", ds.Type)
	require.Equal(t, "prometheus", ds.Query)
	require.NotContains(t, text, "DS_PROMETHEUS")
	fixedRange := regexp.MustCompile(`\[\d+[smhd]\]`)
	for _, p := range d.Panels {
		require.Equal(t, "${datasource}", p.Datasource["uid"], p.Title)
		for _, tg := range p.Targets {
			require.NotRegexp(t, fixedRange, tg.Expr, "%s: use $__rate_interval", p.Title)
		}
	}

	// The provisioning provider reads the directory compose.yaml mounts
	// the dashboard into.
	prov := yamlDocs(t, "grafana/provisioning/dashboards/dtq.yml")[0]
	dir := at(t, prov, "providers", 0, "options", "path").(string)
	require.Contains(t, readFile(t, "compose.yaml"), "./grafana/dtq-dashboard.json:"+dir+"/dtq-dashboard.json:ro")
}
