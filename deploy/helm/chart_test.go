package helm

import (
	"bytes"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	keda "github.com/kedacore/keda/v2/apis/keda/v1alpha1"
	monv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"helm.sh/helm/v4/pkg/chart/common"
	"helm.sh/helm/v4/pkg/chart/common/util"
	"helm.sh/helm/v4/pkg/chart/v2/lint"
	"helm.sh/helm/v4/pkg/chart/v2/lint/support"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	"helm.sh/helm/v4/pkg/engine"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/yaml"
)

const (
	chartDir  = "dtq"
	release   = "dtq"
	namespace = "queues"
	// drainGrace is how long past DTQ_DRAIN_TIMEOUT_S a stopping worker may
	// still take: a termination grace must exceed their sum.
	drainGrace = 2 * time.Second
	// defaultDrain is DTQ_DRAIN_TIMEOUT_S's default (docs/configuration.md).
	defaultDrain = 30 * time.Second
)

// manifests are the objects one rendering of the chart yields, by name,
// each decoded strictly into its project's Go type.
type manifests struct {
	deployments     map[string]*appsv1.Deployment
	services        map[string]*corev1.Service
	secrets         map[string]*corev1.Secret
	configMaps      map[string]*corev1.ConfigMap
	pdbs            map[string]*policyv1.PodDisruptionBudget
	serviceMonitors map[string]*monv1.ServiceMonitor
	rules           map[string]*monv1.PrometheusRule
	scaledObjects   map[string]*keda.ScaledObject
	triggerAuths    map[string]*keda.TriggerAuthentication
	notes           string
}

// add decodes one manifest into the type its apiVersion and kind name,
// refusing any field that type does not have.
func (m *manifests) add(file string, doc []byte) error {
	var tm metav1.TypeMeta
	if err := yaml.Unmarshal(doc, &tm); err != nil {
		return fmt.Errorf("%s: %w", file, err)
	}
	var name string
	var err error
	switch tm.APIVersion + " " + tm.Kind {
	case "apps/v1 Deployment":
		name, err = decode(doc, m.deployments)
	case "v1 Service":
		name, err = decode(doc, m.services)
	case "v1 Secret":
		name, err = decode(doc, m.secrets)
	case "v1 ConfigMap":
		name, err = decode(doc, m.configMaps)
	case "policy/v1 PodDisruptionBudget":
		name, err = decode(doc, m.pdbs)
	case "monitoring.coreos.com/v1 ServiceMonitor":
		name, err = decode(doc, m.serviceMonitors)
	case "monitoring.coreos.com/v1 PrometheusRule":
		name, err = decode(doc, m.rules)
	case "keda.sh/v1alpha1 ScaledObject":
		name, err = decode(doc, m.scaledObjects)
	case "keda.sh/v1alpha1 TriggerAuthentication":
		name, err = decode(doc, m.triggerAuths)
	default:
		return fmt.Errorf("%s: unexpected %s %s", file, tm.APIVersion, tm.Kind)
	}
	if err != nil {
		return fmt.Errorf("%s: %s %s: %w", file, tm.Kind, name, err)
	}
	return nil
}

// object is what every decoded manifest is: a Kubernetes object.
type object interface {
	GetName() string
}

// decode strictly decodes doc into a new T and files it under its name,
// refusing a second object of the same kind and name.
func decode[T any, PT interface {
	*T
	object
}](doc []byte, into map[string]PT) (string, error) {
	obj := PT(new(T))
	if err := yaml.UnmarshalStrict(doc, obj); err != nil {
		return "", err
	}
	name := obj.GetName()
	if name == "" {
		return "", fmt.Errorf("no metadata.name")
	}
	if _, dup := into[name]; dup {
		return name, fmt.Errorf("rendered twice")
	}
	into[name] = obj
	return name, nil
}

var docSep = regexp.MustCompile(`(?m)^---[ \t]*$`)

// render renders the chart as `helm install dtq deploy/helm/dtq -n queues
// -f vals` would (no cluster: lookup finds nothing) and decodes the result.
func render(vals map[string]any) (*manifests, error) {
	ch, err := loader.Load(chartDir)
	if err != nil {
		return nil, err
	}
	top, err := util.ToRenderValuesWithSchemaValidation(ch, vals,
		common.ReleaseOptions{Name: release, Namespace: namespace, Revision: 1, IsInstall: true},
		common.DefaultCapabilities, false)
	if err != nil {
		return nil, err
	}
	files, err := engine.Render(ch, top)
	if err != nil {
		return nil, err
	}
	m := &manifests{
		deployments: map[string]*appsv1.Deployment{}, services: map[string]*corev1.Service{},
		secrets: map[string]*corev1.Secret{}, configMaps: map[string]*corev1.ConfigMap{},
		pdbs: map[string]*policyv1.PodDisruptionBudget{}, serviceMonitors: map[string]*monv1.ServiceMonitor{},
		rules: map[string]*monv1.PrometheusRule{}, scaledObjects: map[string]*keda.ScaledObject{},
		triggerAuths: map[string]*keda.TriggerAuthentication{},
	}
	for file, text := range files {
		switch {
		case strings.HasSuffix(file, "/NOTES.txt"):
			m.notes = text
			continue
		case !strings.HasSuffix(file, ".yaml"):
			continue
		}
		for _, doc := range docSep.Split(text, -1) {
			if onlyComments(doc) {
				continue
			}
			if err := m.add(file, []byte(doc)); err != nil {
				return nil, err
			}
		}
	}
	return m, nil
}

func onlyComments(doc string) bool {
	for line := range strings.SplitSeq(doc, "\n") {
		if l := strings.TrimSpace(line); l != "" && !strings.HasPrefix(l, "#") {
			return false
		}
	}
	return true
}

func mustRender(t *testing.T, vals map[string]any) *manifests {
	t.Helper()
	m, err := render(vals)
	if err != nil {
		t.Fatalf("rendering the chart: %v", err)
	}
	return m
}

// settings are the DTQ_* settings dtq reads: the first column of the table
// in docs/configuration.md, which cmd/dtq/internal/config's tests hold to
// the settings the code reads.
var settings = sync.OnceValues(func() ([]string, error) {
	b, err := os.ReadFile(filepath.Join("..", "..", "docs", "configuration.md"))
	if err != nil {
		return nil, err
	}
	var names []string
	for _, m := range regexp.MustCompile("(?m)^\\| `(DTQ_[A-Z0-9_]+)` \\|").FindAllSubmatch(b, -1) {
		names = append(names, string(m[1]))
	}
	if len(names) < 40 {
		return nil, fmt.Errorf("docs/configuration.md: found only %d settings in its table", len(names))
	}
	return names, nil
})

func checkSetting(t *testing.T, where, name string) {
	t.Helper()
	names, err := settings()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(names, name) {
		t.Errorf("%s: %s is not a dtq setting (docs/configuration.md)", where, name)
	}
}

// secretSettings hold secrets: never in a ConfigMap or a plain value.
var secretSettings = []string{"DTQ_REDIS_URL", "DTQ_API_KEYS", "DTQ_API_KEY", "DTQ_LEASE_SECRET"}

// want is what a rendering is checked against besides the rules every
// rendering keeps.
type want struct {
	image      string
	secretName string
	// secretRendered: the chart makes the Secret (no existingSecret).
	secretRendered bool
	keda           string // "", "metrics-api" or "prometheus"
	kedaQueues     []string
	monitoring     bool
	grace          time.Duration // the workers' termination grace
}

// check holds the manifests to the rules every rendering keeps, and to w.
func check(t *testing.T, m *manifests, w want) {
	t.Helper()
	count := func(kind string, got, n int) {
		t.Helper()
		if got != n {
			t.Errorf("%d %s rendered, want %d", got, kind, n)
		}
	}
	count("Deployments", len(m.deployments), 2)
	count("Services", len(m.services), 2)
	count("PodDisruptionBudgets", len(m.pdbs), 2)
	count("ConfigMaps", len(m.configMaps), 1)
	count("Secrets", len(m.secrets), map[bool]int{true: 1}[w.secretRendered])
	count("ServiceMonitors", len(m.serviceMonitors), map[bool]int{true: 2}[w.monitoring])
	count("PrometheusRules", len(m.rules), map[bool]int{true: 1}[w.monitoring])
	count("ScaledObjects", len(m.scaledObjects), map[bool]int{true: 1}[w.keda != ""])
	count("TriggerAuthentications", len(m.triggerAuths), map[bool]int{true: 1}[w.keda == "metrics-api"])
	if t.Failed() {
		t.FailNow()
	}

	cm := m.configMaps[release+"-config"]
	if cm == nil {
		t.Fatalf("no ConfigMap %s-config", release)
	}
	for k := range cm.Data {
		checkSetting(t, "ConfigMap", k)
		if slices.Contains(secretSettings, k) {
			t.Errorf("ConfigMap holds the secret %s", k)
		}
	}
	var secret *corev1.Secret
	if w.secretRendered {
		secret = m.secrets[w.secretName]
		if secret == nil {
			t.Fatalf("no Secret %s", w.secretName)
		}
		checkKeys(t, secret)
	}

	pods := map[string]labels.Set{}
	for _, component := range []string{"api", "worker"} {
		d := m.deployments[release+"-"+component]
		if d == nil {
			t.Fatalf("no Deployment %s-%s", release, component)
		}
		pods[component] = d.Spec.Template.Labels
	}
	for component, podLabels := range pods {
		name := release + "-" + component
		where := "Deployment " + name
		d := m.deployments[name]
		sel, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
		if err != nil || !sel.Matches(podLabels) {
			t.Errorf("%s: its selector does not select its pods (%v)", where, err)
		}
		// Its Service and PodDisruptionBudget select its pods and no others.
		for other, otherLabels := range pods {
			svc, pdb := m.services[name], m.pdbs[name]
			if svc == nil || pdb == nil {
				t.Fatalf("%s has no Service or PodDisruptionBudget of its name", where)
			}
			pdbSel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
			if err != nil {
				t.Fatal(err)
			}
			selects := labels.SelectorFromSet(svc.Spec.Selector).Matches(otherLabels)
			if selects != (other == component) {
				t.Errorf("Service %s selects the %s pods: %v", name, other, selects)
			}
			if pdbSel.Matches(otherLabels) != (other == component) {
				t.Errorf("PodDisruptionBudget %s selects the %s pods: %v", name, other, !selects)
			}
		}
		if component == "worker" && m.services[name].Spec.ClusterIP != corev1.ClusterIPNone {
			t.Errorf("Service %s is not headless: Prometheus finds each worker through it", name)
		}
		if w.keda != "" && component == "worker" && d.Spec.Replicas != nil {
			t.Errorf("%s sets replicas though the ScaledObject owns them", where)
		}
		checkPod(t, where, component, d, cm, secret, w)
	}

	if w.monitoring {
		checkMonitoring(t, m, w)
	}
	if w.keda != "" {
		checkScaledObject(t, m, w)
	}
	if !strings.Contains(m.notes, release+"-api:8080") {
		t.Errorf("NOTES.txt does not name the API Service:\n%s", m.notes)
	}
}

// checkKeys checks the Secret's keys: a Redis URL, DTQ_API_KEYS entries of
// known roles, and a reader key that is the secret of one of them.
func checkKeys(t *testing.T, s *corev1.Secret) {
	t.Helper()
	for _, k := range []string{"redis-url", "api-keys", "reader-key"} {
		if s.StringData[k] == "" {
			t.Errorf("Secret %s has no %s", s.Name, k)
		}
	}
	if u, err := url.Parse(s.StringData["redis-url"]); err != nil || !strings.HasPrefix(u.Scheme, "redis") {
		t.Errorf("Secret %s: redis-url %q is not a Redis URL", s.Name, s.StringData["redis-url"])
	}
	found := false
	for entry := range strings.SplitSeq(s.StringData["api-keys"], ",") {
		parts := strings.Split(entry, ":")
		if len(parts) < 3 {
			continue // a queue continuing a scoped key's list
		}
		if !slices.Contains([]string{"reader", "producer", "worker", "admin"}, parts[0]) {
			t.Errorf("Secret %s: api-keys has the role %q", s.Name, parts[0])
		}
		if parts[2] == s.StringData["reader-key"] {
			found = true
		}
	}
	if !found {
		t.Errorf("Secret %s: reader-key is not the secret of a key in api-keys", s.Name)
	}
}

// checkPod checks one Deployment's pod: the image's user, no privileges, a
// read-only root, real settings only, secrets from the Secret, probes on the
// port dtq listens on, resources, and for workers a grace past the drain.
func checkPod(t *testing.T, where, component string, d *appsv1.Deployment, cm *corev1.ConfigMap, secret *corev1.Secret, w want) {
	t.Helper()
	pod := d.Spec.Template.Spec
	psc := pod.SecurityContext
	if psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot || psc.RunAsUser == nil || *psc.RunAsUser != 65532 ||
		psc.SeccompProfile == nil || psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("%s: the pod must run as non-root user 65532 with the RuntimeDefault seccomp profile: %+v", where, psc)
	}
	if pod.AutomountServiceAccountToken == nil || *pod.AutomountServiceAccountToken {
		t.Errorf("%s: dtq does not talk to the Kubernetes API: no service account token", where)
	}
	if len(pod.Containers) != 1 {
		t.Fatalf("%s: %d containers", where, len(pod.Containers))
	}
	c := pod.Containers[0]
	sc := c.SecurityContext
	if sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem ||
		sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation ||
		(sc.Privileged != nil && *sc.Privileged) ||
		sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) || len(sc.Capabilities.Add) > 0 {
		t.Errorf("%s: the container must have a read-only root, no privilege escalation and no capabilities: %+v", where, sc)
	}
	if c.Image != w.image {
		t.Errorf("%s: image %q, want %q", where, c.Image, w.image)
	}
	if len(c.Args) == 0 || c.Args[0] != component {
		t.Errorf("%s: args %q do not start with %s", where, c.Args, component)
	}

	// The environment: the ConfigMap's settings, then the container's own.
	env := map[string]string{}
	if len(c.EnvFrom) != 1 || c.EnvFrom[0].ConfigMapRef == nil || c.EnvFrom[0].ConfigMapRef.Name != cm.Name || c.EnvFrom[0].Prefix != "" {
		t.Errorf("%s: envFrom must be the ConfigMap %s alone (a Secret's keys are no setting names): %+v", where, cm.Name, c.EnvFrom)
	}
	for k, v := range cm.Data {
		env[k] = v
	}
	fromSecret := map[string]string{}
	for _, e := range c.Env {
		checkSetting(t, where, e.Name)
		switch {
		case e.ValueFrom == nil:
			if slices.Contains(secretSettings, e.Name) {
				t.Errorf("%s: the secret %s is a plain value", where, e.Name)
			}
			env[e.Name] = e.Value
		case e.ValueFrom.SecretKeyRef != nil:
			ref := e.ValueFrom.SecretKeyRef
			if ref.Name != w.secretName {
				t.Errorf("%s: %s comes from Secret %s, not %s", where, e.Name, ref.Name, w.secretName)
			}
			if secret != nil {
				if _, ok := secret.StringData[ref.Key]; !ok && (ref.Optional == nil || !*ref.Optional) {
					t.Errorf("%s: %s: Secret %s has no key %s", where, e.Name, ref.Name, ref.Key)
				}
			}
			fromSecret[e.Name] = ref.Key
		default:
			t.Errorf("%s: %s comes from neither a value nor the Secret", where, e.Name)
		}
	}
	wantSecret := map[string]string{"DTQ_REDIS_URL": "redis-url"}
	if component == "api" {
		wantSecret["DTQ_API_KEYS"] = "api-keys"
		if _, ok := fromSecret["DTQ_LEASE_SECRET"]; ok {
			wantSecret["DTQ_LEASE_SECRET"] = "lease-secret"
		}
	}
	if fmt.Sprint(fromSecret) != fmt.Sprint(wantSecret) {
		t.Errorf("%s: settings from the Secret %v, want %v", where, fromSecret, wantSecret)
	}

	// The probes reach the port dtq listens on, on the pod's address.
	addrVar := map[string]string{"api": "DTQ_API_ADDR", "worker": "DTQ_WORKER_METRICS_ADDR"}[component]
	host, port, err := net.SplitHostPort(env[addrVar])
	if err != nil || host == "127.0.0.1" || host == "localhost" {
		t.Errorf("%s: %s=%q: the kubelet probes the pod's address", where, addrVar, env[addrVar])
	}
	ports := map[string]string{}
	for _, p := range c.Ports {
		ports[p.Name] = strconv.Itoa(int(p.ContainerPort))
	}
	for _, p := range []struct {
		name  string
		probe *corev1.Probe
		path  string
	}{{"readinessProbe", c.ReadinessProbe, "/ready"}, {"livenessProbe", c.LivenessProbe, "/health"}} {
		if p.probe == nil || p.probe.HTTPGet == nil {
			t.Errorf("%s: no HTTP %s", where, p.name)
			continue
		}
		if p.probe.HTTPGet.Path != p.path {
			t.Errorf("%s: %s asks %s, want %s", where, p.name, p.probe.HTTPGet.Path, p.path)
		}
		if got := ports[p.probe.HTTPGet.Port.String()]; got != port {
			t.Errorf("%s: %s probes port %q (%s), dtq listens on %s", where, p.name, p.probe.HTTPGet.Port.String(), got, port)
		}
	}
	if c.Resources.Requests.Cpu().IsZero() || c.Resources.Requests.Memory().IsZero() || c.Resources.Limits.Memory().IsZero() {
		t.Errorf("%s: no CPU and memory requests or no memory limit: %+v", where, c.Resources)
	}

	if component == "worker" {
		drain := defaultDrain
		if s, ok := env["DTQ_DRAIN_TIMEOUT_S"]; ok {
			n, err := strconv.Atoi(s)
			if err != nil {
				t.Fatalf("%s: DTQ_DRAIN_TIMEOUT_S=%q", where, s)
			}
			drain = time.Duration(n) * time.Second
		}
		if pod.TerminationGracePeriodSeconds == nil {
			t.Fatalf("%s: no terminationGracePeriodSeconds", where)
		}
		grace := time.Duration(*pod.TerminationGracePeriodSeconds) * time.Second
		if grace <= drain+drainGrace {
			t.Errorf("%s: terminationGracePeriodSeconds %s does not outlast DTQ_DRAIN_TIMEOUT_S %s", where, grace, drain)
		}
		if grace != w.grace {
			t.Errorf("%s: terminationGracePeriodSeconds %s, want %s", where, grace, w.grace)
		}
	}
}

// checkMonitoring checks the ServiceMonitors (the API's with the reader key,
// under the job names the alerts watch) and the PrometheusRule.
func checkMonitoring(t *testing.T, m *manifests, w want) {
	t.Helper()
	jobs := map[string]bool{}
	for _, component := range []string{"api", "worker"} {
		name := release + "-" + component
		sm := m.serviceMonitors[name]
		if sm == nil {
			t.Fatalf("no ServiceMonitor %s", name)
		}
		svc := m.services[name]
		sel, err := metav1.LabelSelectorAsSelector(&sm.Spec.Selector)
		if err != nil {
			t.Fatal(err)
		}
		for other, s := range m.services {
			if sel.Matches(labels.Set(s.Labels)) != (other == name) {
				t.Errorf("ServiceMonitor %s selects Service %s: %v", name, other, other != name)
			}
		}
		if len(sm.Spec.Endpoints) != 1 {
			t.Fatalf("ServiceMonitor %s: %d endpoints", name, len(sm.Spec.Endpoints))
		}
		ep := sm.Spec.Endpoints[0]
		if !slices.ContainsFunc(svc.Spec.Ports, func(p corev1.ServicePort) bool { return p.Name == ep.Port }) {
			t.Errorf("ServiceMonitor %s scrapes port %q, which Service %s does not have", name, ep.Port, name)
		}
		if ep.Path != "/metrics" {
			t.Errorf("ServiceMonitor %s scrapes %s", name, ep.Path)
		}
		auth := ep.Authorization
		switch component {
		case "api":
			if auth == nil || auth.Type != "Bearer" || auth.Credentials == nil ||
				auth.Credentials.Name != w.secretName || auth.Credentials.Key != "reader-key" {
				t.Errorf("ServiceMonitor %s: the API's /metrics needs the reader key as a Bearer token: %+v", name, auth)
			}
		case "worker":
			if auth != nil {
				t.Errorf("ServiceMonitor %s sends credentials to the workers' unauthenticated /metrics", name)
			}
		}
		for _, r := range ep.RelabelConfigs {
			if r.TargetLabel == "job" && r.Replacement != nil {
				jobs[*r.Replacement] = true
			}
		}
	}
	if !jobs["dtq-api"] || !jobs["dtq-worker"] {
		t.Errorf("the ServiceMonitors set the jobs %v, want dtq-api and dtq-worker", jobs)
	}

	rule := m.rules[release]
	if rule == nil {
		t.Fatalf("no PrometheusRule %s", release)
	}
	var alerts monv1.PrometheusRuleSpec
	b, err := os.ReadFile(filepath.Join("..", "prometheus", "alerts.yml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.UnmarshalStrict(b, &alerts); err != nil {
		t.Fatalf("deploy/prometheus/alerts.yml: %v", err)
	}
	got, _ := yaml.Marshal(rule.Spec)
	want, _ := yaml.Marshal(alerts)
	if !bytes.Equal(got, want) {
		t.Errorf("the PrometheusRule's groups differ from deploy/prometheus/alerts.yml:\n%s\nwant:\n%s", got, want)
	}
	// Every job an alert watches is one the ServiceMonitors set.
	for _, g := range rule.Spec.Groups {
		for _, r := range g.Rules {
			for _, j := range regexp.MustCompile(`job="([^"]+)"`).FindAllStringSubmatch(r.Expr.String(), -1) {
				if !jobs[j[1]] {
					t.Errorf("alert %s watches job %s, which no ServiceMonitor sets", r.Alert, j[1])
				}
			}
		}
	}
}

// checkScaledObject checks the ScaledObject against KEDA's own validation,
// and that its trigger asks for the desired worker count of w.kedaQueues.
func checkScaledObject(t *testing.T, m *manifests, w want) {
	t.Helper()
	name := release + "-worker"
	so := m.scaledObjects[name]
	if so == nil {
		t.Fatalf("no ScaledObject %s", name)
	}
	if ref := so.Spec.ScaleTargetRef; ref == nil || ref.Name != name || ref.Kind != "Deployment" || m.deployments[ref.Name] == nil {
		t.Errorf("ScaledObject %s does not scale the worker Deployment: %+v", name, ref)
	}
	if err := keda.CheckReplicaCountBoundsAreValid(so); err != nil {
		t.Error(err)
	}
	if err := keda.ValidateTriggers(so.Spec.Triggers); err != nil {
		t.Error(err)
	}
	wantTriggers := 1
	if w.keda == "metrics-api" {
		wantTriggers = len(w.kedaQueues) // one per queue, summed
	}
	if len(so.Spec.Triggers) != wantTriggers {
		t.Fatalf("ScaledObject %s: %d triggers, want %d", name, len(so.Spec.Triggers), wantTriggers)
	}
	if wantTriggers > 1 {
		var names []string
		for i := range wantTriggers {
			names = append(names, fmt.Sprintf("q%d", i))
		}
		mod := so.Spec.Advanced
		if mod == nil || mod.ScalingModifiers.Formula != strings.Join(names, " + ") || mod.ScalingModifiers.Target != "1" ||
			mod.ScalingModifiers.MetricType != "AverageValue" {
			t.Errorf("ScaledObject %s: the workers' count is not the sum of the queues': %+v", name, mod)
		}
		if _, err := keda.ValidateAndCompileScalingModifiers(so); err != nil {
			t.Errorf("ScaledObject %s: %v", name, err)
		}
	} else if so.Spec.Advanced != nil {
		t.Errorf("ScaledObject %s: advanced %+v with one trigger", name, so.Spec.Advanced)
	}
	for i, tr := range so.Spec.Triggers {
		if tr.Type != w.keda {
			t.Errorf("trigger %s, want %s", tr.Type, w.keda)
		}
		if tr.MetricType != "AverageValue" {
			t.Errorf("metricType %s: the workers' count is the value over the target", tr.MetricType)
		}
		md := tr.Metadata
		switch w.keda {
		case "metrics-api":
			u, err := url.Parse(md["url"])
			if err != nil {
				t.Fatal(err)
			}
			api := m.services[release+"-api"]
			if want := fmt.Sprintf("%s.%s.svc:%d", api.Name, namespace, api.Spec.Ports[0].Port); u.Scheme != "http" || u.Host != want {
				t.Errorf("metrics-api url %s does not reach the API Service %s", u, want)
			}
			if want := "/api/v1/queues/" + w.kedaQueues[i] + "/scaling"; u.Path != want || u.RawQuery != "" {
				t.Errorf("metrics-api url %s, want the path %s", u, want)
			}
			for k, v := range map[string]string{"format": "json", "valueLocation": "desired_workers", "targetValue": "1", "authMode": "bearer"} {
				if md[k] != v {
					t.Errorf("metrics-api %s=%q, want %q", k, md[k], v)
				}
			}
			if tr.AuthenticationRef == nil {
				t.Fatal("the metrics-api trigger has no authenticationRef: the API needs a reader key")
			}
			ta := m.triggerAuths[tr.AuthenticationRef.Name]
			if ta == nil || tr.AuthenticationRef.Kind != "" && tr.AuthenticationRef.Kind != "TriggerAuthentication" {
				t.Fatalf("the trigger's authenticationRef %+v names no rendered TriggerAuthentication", tr.AuthenticationRef)
			}
			want := []keda.AuthSecretTargetRef{{Parameter: "token", Name: w.secretName, Key: "reader-key"}}
			if !slices.Equal(ta.Spec.SecretTargetRef, want) {
				t.Errorf("TriggerAuthentication %s: %+v, want %+v", ta.Name, ta.Spec.SecretTargetRef, want)
			}
		case "prometheus":
			want := fmt.Sprintf(`max(dtq_queue_desired_workers{queue=%q})`, w.kedaQueues[0])
			if len(w.kedaQueues) > 1 {
				want = fmt.Sprintf(`sum(max by (queue) (dtq_queue_desired_workers{queue=~%q}))`, strings.Join(w.kedaQueues, "|"))
			}
			if md["query"] != want || md["threshold"] != "1" || md["serverAddress"] == "" {
				t.Errorf("prometheus trigger %v, want the query %s and threshold 1", md, want)
			}
			if tr.AuthenticationRef != nil {
				t.Errorf("the prometheus trigger sends dtq's reader key to Prometheus")
			}
		}
	}
}

func TestDefaultValues(t *testing.T) {
	t.Parallel()
	m := mustRender(t, nil)
	check(t, m, want{image: "dtq:" + appVersion(t), secretName: release + "-secrets", secretRendered: true, grace: defaultDrain + 15*time.Second})
	for _, name := range []string{"dtq-api", "dtq-worker"} {
		if r := m.deployments[name].Spec.Replicas; r == nil || *r != 2 {
			t.Errorf("Deployment %s: replicas %v, want 2", name, r)
		}
	}
	// No keys given: the chart makes an admin key and a reader key.
	s := m.secrets[release+"-secrets"].StringData
	keys := regexp.MustCompile(`^admin:admin:[A-Za-z0-9]{40},reader:metrics:([A-Za-z0-9]{40})$`).FindStringSubmatch(s["api-keys"])
	if len(keys) != 2 || keys[1] != s["reader-key"] {
		t.Errorf("made keys %q, reader key %q", s["api-keys"], s["reader-key"])
	}
	if !strings.Contains(m.notes, "get secret "+release+"-secrets") {
		t.Errorf("NOTES.txt does not say where the made keys are:\n%s", m.notes)
	}
}

func TestFullValues(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		vals map[string]any
		want want
	}{
		{
			name: "metrics-api",
			vals: map[string]any{
				"image":  map[string]any{"repository": "registry.example.com/dtq", "tag": "v0.2.0"},
				"config": map[string]any{"DTQ_QUEUES": "critical:6,default:3", "DTQ_DRAIN_TIMEOUT_S": "60", "DTQ_MAX_QUEUE_DEPTH": 50000, "DTQ_LOG_LEVEL": "debug"},
				"secret": map[string]any{
					"redisUrl": "rediss://default:pw@redis.example.com:6380/0", "apiKeys": "admin:ops:adm1n-s3cret,reader:prometheus:r3ader-s3cret:queues=critical,default",
					"readerKey": "r3ader-s3cret", "leaseSecret": strings.Repeat("l", 40),
				},
				"api":            map[string]any{"replicas": 3, "env": map[string]any{"DTQ_MAX_WAITS": "2000"}},
				"worker":         map[string]any{"concurrency": 32, "env": map[string]any{"DTQ_VISIBILITY_TIMEOUT_S": "60"}},
				"serviceMonitor": map[string]any{"enabled": true, "labels": map[string]any{"release": "prometheus"}},
				"prometheusRule": map[string]any{"enabled": true},
				"keda":           map[string]any{"enabled": true, "trigger": "metrics-api", "minReplicaCount": 0},
			},
			want: want{
				image: "registry.example.com/dtq:v0.2.0", secretName: release + "-secrets", secretRendered: true,
				keda: "metrics-api", kedaQueues: []string{"critical", "default"}, monitoring: true, grace: 75 * time.Second,
			},
		},
		{
			name: "prometheus, existing Secret",
			vals: map[string]any{
				"secret":         map[string]any{"existingSecret": "dtq-managed"},
				"worker":         map[string]any{"terminationGracePeriodSeconds": 100, "env": map[string]any{"DTQ_DRAIN_TIMEOUT_S": "90"}},
				"serviceMonitor": map[string]any{"enabled": true},
				"prometheusRule": map[string]any{"enabled": true},
				"keda":           map[string]any{"enabled": true, "trigger": "prometheus", "queues": []any{"critical", "bulk"}},
			},
			want: want{
				image: "dtq:" + appVersion(t), secretName: "dtq-managed",
				keda: "prometheus", kedaQueues: []string{"critical", "bulk"}, monitoring: true, grace: 100 * time.Second,
			},
		},
		{
			name: "metrics-api, one queue",
			vals: map[string]any{"keda": map[string]any{"enabled": true}},
			want: want{
				image: "dtq:" + appVersion(t), secretName: release + "-secrets", secretRendered: true,
				keda: "metrics-api", kedaQueues: []string{"default"}, grace: defaultDrain + 15*time.Second,
			},
		},
		{
			name: "prometheus, one queue",
			vals: map[string]any{"keda": map[string]any{"enabled": true, "trigger": "prometheus"}, "config": map[string]any{"DTQ_QUEUES": "emails:2"}},
			want: want{
				image: "dtq:" + appVersion(t), secretName: release + "-secrets", secretRendered: true,
				keda: "prometheus", kedaQueues: []string{"emails"}, grace: defaultDrain + 15*time.Second,
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			m := mustRender(t, tc.vals)
			check(t, m, tc.want)
			if _, given := tc.vals["secret"]; given && tc.want.secretRendered {
				s := m.secrets[tc.want.secretName].StringData
				if s["lease-secret"] != strings.Repeat("l", 40) || s["reader-key"] != "r3ader-s3cret" {
					t.Errorf("Secret %v does not hold the given lease secret and reader key", s)
				}
			}
			if sm, ok := tc.vals["serviceMonitor"].(map[string]any); ok {
				if want, ok := sm["labels"].(map[string]any); ok && m.serviceMonitors[release+"-api"].Labels["release"] != want["release"] {
					t.Errorf("ServiceMonitor labels %v lack %v", m.serviceMonitors[release+"-api"].Labels, want)
				}
			}
		})
	}
}

// TestRefusals: values that would make a broken deployment fail the
// rendering, with a message naming the value to fix.
func TestRefusals(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		vals map[string]any
		want string
	}{
		{"grace within the drain", map[string]any{"worker": map[string]any{"terminationGracePeriodSeconds": 32}},
			"worker.terminationGracePeriodSeconds (32) must be longer than DTQ_DRAIN_TIMEOUT_S (30)"},
		{"grace within a worker's own drain", map[string]any{"worker": map[string]any{"terminationGracePeriodSeconds": 60, "env": map[string]any{"DTQ_DRAIN_TIMEOUT_S": "120"}}, "config": map[string]any{"DTQ_DRAIN_TIMEOUT_S": "10"}},
			"worker.terminationGracePeriodSeconds (60) must be longer than DTQ_DRAIN_TIMEOUT_S (120)"},
		{"a secret in the ConfigMap", map[string]any{"config": map[string]any{"DTQ_API_KEYS": "admin:a:b"}}, "config.DTQ_API_KEYS: secrets go in secret"},
		{"not a setting", map[string]any{"api": map[string]any{"env": map[string]any{"REDIS_HOST": "x"}}}, "api.env.REDIS_HOST: only DTQ_* settings"},
		{"an address the chart sets", map[string]any{"worker": map[string]any{"env": map[string]any{"DTQ_WORKER_METRICS_ADDR": ":1"}}}, "worker.env.DTQ_WORKER_METRICS_ADDR: the chart sets it"},
		{"keys without a reader key", map[string]any{"secret": map[string]any{"apiKeys": "admin:ops:s3cret"}}, "secret.readerKey: set it"},
		{"a reader key not among the keys", map[string]any{"secret": map[string]any{"apiKeys": "admin:ops:s3cret", "readerKey": "other"}}, "secret.readerKey is not the secret of a key"},
		{"no Redis", map[string]any{"secret": map[string]any{"redisUrl": ""}}, "secret.redisUrl: the Redis URL"},
		{"a misspelt value", map[string]any{"keda": map[string]any{"enable": true}}, "additional properties 'enable' not allowed"},
		{"a port out of range", map[string]any{"api": map[string]any{"port": 80800}}, "at '/api/port'"},
		{"an unknown trigger", map[string]any{"keda": map[string]any{"enabled": true, "trigger": "cpu"}}, `keda.trigger: "cpu" is neither`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := render(tc.vals)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("rendering gave %v, want an error with %q", err, tc.want)
			}
		})
	}
}

// TestLint runs Helm's own chart checks (helm lint) on default and full values.
func TestLint(t *testing.T) {
	t.Parallel()
	for _, vals := range []map[string]any{nil, {
		"serviceMonitor": map[string]any{"enabled": true}, "prometheusRule": map[string]any{"enabled": true},
		"keda": map[string]any{"enabled": true},
	}} {
		l := lint.RunAll(chartDir, vals, namespace)
		for _, msg := range l.Messages {
			if msg.Severity > support.InfoSev {
				t.Errorf("helm lint: %s", msg)
			}
		}
	}
}

// TestAlertsCopy: the chart carries deploy/prometheus/alerts.yml (a chart
// reads no file outside its directory); the copy must not drift.
func TestAlertsCopy(t *testing.T) {
	t.Parallel()
	orig, err := os.ReadFile(filepath.Join("..", "prometheus", "alerts.yml"))
	if err != nil {
		t.Fatal(err)
	}
	cp, err := os.ReadFile(filepath.Join(chartDir, "files", "alerts.yml"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(orig, cp) {
		t.Error("deploy/helm/dtq/files/alerts.yml differs from deploy/prometheus/alerts.yml: cp deploy/prometheus/alerts.yml deploy/helm/dtq/files/")
	}
}

func appVersion(t *testing.T) string {
	t.Helper()
	ch, err := loader.Load(chartDir)
	if err != nil {
		t.Fatal(err)
	}
	return ch.Metadata.AppVersion
}
