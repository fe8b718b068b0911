package deploy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	sigsyaml "sigs.k8s.io/yaml"
)

// k8sObject is one decoded manifest; exactly one typed field is set.
type k8sObject struct {
	file string
	kind string
	name string

	sts     *appsv1.StatefulSet
	svc     *corev1.Service
	secret  *corev1.Secret
	cm      *corev1.ConfigMap
	ing     *networkingv1.Ingress
	netpol  *networkingv1.NetworkPolicy
	hpa     *autoscalingv2.HorizontalPodAutoscaler
	pdb     *policyv1.PodDisruptionBudget
	svcmon  *monitoringv1.ServiceMonitor
	kustomz *kustomization
}

// kustomization is the subset of kustomize's Kustomization this folder uses.
type kustomization struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Labels     []struct {
		Pairs            map[string]string `json:"pairs"`
		IncludeSelectors bool              `json:"includeSelectors"`
	} `json:"labels"`
	Resources []string `json:"resources"`
	Images    []struct {
		Name    string `json:"name"`
		NewName string `json:"newName"`
		NewTag  string `json:"newTag"`
	} `json:"images"`
}

// strictDecode converts YAML to JSON and decodes it into v, rejecting
// unknown fields and trailing data.
func strictDecode(doc []byte, v any) error {
	j, err := sigsyaml.YAMLToJSON(doc)
	if err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(j))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return fmt.Errorf("trailing data after the object")
	}
	return nil
}

// loadK8s decodes every document of every file in k8s/ into its API type.
func loadK8s(t *testing.T) []k8sObject {
	t.Helper()
	files, err := filepath.Glob("k8s/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var objs []k8sObject
	for _, file := range files {
		for i, doc := range splitYAML(t, file) {
			var tm metav1.TypeMeta
			if err := sigsyaml.Unmarshal(doc, &tm); err != nil {
				t.Fatalf("%s document %d: %v", file, i+1, err)
			}
			o := k8sObject{file: file, kind: tm.Kind}
			var target any
			want := ""
			switch tm.Kind {
			case "StatefulSet":
				o.sts, want = &appsv1.StatefulSet{}, "apps/v1"
				target = o.sts
			case "Service":
				o.svc, want = &corev1.Service{}, "v1"
				target = o.svc
			case "Secret":
				o.secret, want = &corev1.Secret{}, "v1"
				target = o.secret
			case "ConfigMap":
				o.cm, want = &corev1.ConfigMap{}, "v1"
				target = o.cm
			case "Ingress":
				o.ing, want = &networkingv1.Ingress{}, "networking.k8s.io/v1"
				target = o.ing
			case "NetworkPolicy":
				o.netpol, want = &networkingv1.NetworkPolicy{}, "networking.k8s.io/v1"
				target = o.netpol
			case "HorizontalPodAutoscaler":
				o.hpa, want = &autoscalingv2.HorizontalPodAutoscaler{}, "autoscaling/v2"
				target = o.hpa
			case "PodDisruptionBudget":
				o.pdb, want = &policyv1.PodDisruptionBudget{}, "policy/v1"
				target = o.pdb
			case "ServiceMonitor":
				o.svcmon, want = &monitoringv1.ServiceMonitor{}, "monitoring.coreos.com/v1"
				target = o.svcmon
			case "Kustomization":
				o.kustomz, want = &kustomization{}, "kustomize.config.k8s.io/v1beta1"
				target = o.kustomz
			default:
				t.Fatalf("%s document %d: kind %q is not one this folder should hold", file, i+1, tm.Kind)
			}
			if tm.APIVersion != want {
				t.Errorf("%s: %s has apiVersion %q, want %q", file, tm.Kind, tm.APIVersion, want)
			}
			if err := strictDecode(doc, target); err != nil {
				t.Fatalf("%s document %d (%s): %v", file, i+1, tm.Kind, err)
			}
			if om, ok := target.(metav1.Object); ok {
				o.name = om.GetName()
				if om.GetNamespace() != "" {
					t.Errorf("%s: %s %s sets a namespace; the manifests are namespace-less", file, tm.Kind, o.name)
				}
				if o.name == "" {
					t.Errorf("%s: %s without a name", file, tm.Kind)
				}
			}
			objs = append(objs, o)
		}
	}
	return objs
}

func matches(sel map[string]string, lbls map[string]string) bool {
	return len(sel) > 0 && labels.SelectorFromSet(sel).Matches(labels.Set(lbls))
}

func labelSelectorMatches(t *testing.T, sel *metav1.LabelSelector, lbls map[string]string) bool {
	t.Helper()
	if sel == nil {
		return false
	}
	s, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil {
		t.Errorf("invalid selector %v: %v", sel, err)
		return false
	}
	return !s.Empty() && s.Matches(labels.Set(lbls))
}

// TestKubernetesManifests decodes every manifest strictly into its API type
// and checks that they fit together.
func TestKubernetesManifests(t *testing.T) {
	objs := loadK8s(t)
	byKind := map[string][]k8sObject{}
	for _, o := range objs {
		byKind[o.kind] = append(byKind[o.kind], o)
	}
	for _, kind := range []string{"StatefulSet", "Service", "Secret", "ConfigMap", "Ingress", "NetworkPolicy",
		"HorizontalPodAutoscaler", "PodDisruptionBudget", "ServiceMonitor", "Kustomization"} {
		if len(byKind[kind]) == 0 {
			t.Fatalf("k8s/: no %s", kind)
		}
	}
	if len(byKind["StatefulSet"]) != 1 {
		t.Fatalf("want one StatefulSet")
	}
	sts := byKind["StatefulSet"][0].sts
	pod := sts.Spec.Template
	podLabels := pod.Labels

	t.Run("kustomization", func(t *testing.T) {
		k := byKind["Kustomization"][0].kustomz
		files, _ := filepath.Glob("k8s/*.yaml")
		for _, r := range k.Resources {
			if _, err := os.Stat(filepath.Join("k8s", r)); err != nil {
				t.Errorf("kustomization lists %s: %v", r, err)
			}
		}
		for _, f := range files {
			base := filepath.Base(f)
			listed := slices.Contains(k.Resources, base)
			switch base {
			case "kustomization.yaml":
			case "secret.yaml":
				if listed {
					t.Errorf("secret.yaml is a template with placeholders: it must not be applied by the kustomization")
				}
			default:
				if !listed {
					t.Errorf("%s is not listed in kustomization.yaml", base)
				}
			}
		}
		images := map[string]bool{}
		for _, im := range k.Images {
			images[im.Name] = true
		}
		for _, c := range append(pod.Spec.InitContainers, pod.Spec.Containers...) {
			if !images[c.Image] {
				t.Errorf("container %s uses image %q, which kustomization.yaml does not set", c.Name, c.Image)
			}
		}
	})

	t.Run("statefulset", func(t *testing.T) {
		if sts.Spec.Replicas == nil || *sts.Spec.Replicas != 3 {
			t.Errorf("replicas = %v, want 3", sts.Spec.Replicas)
		}
		if !labelSelectorMatches(t, sts.Spec.Selector, podLabels) {
			t.Errorf("the StatefulSet's selector does not match its pod template labels")
		}
		var headless *corev1.Service
		for _, o := range byKind["Service"] {
			if o.name == sts.Spec.ServiceName {
				headless = o.svc
			}
		}
		if headless == nil || headless.Spec.ClusterIP != corev1.ClusterIPNone {
			t.Errorf("serviceName %q is not a headless Service of k8s/", sts.Spec.ServiceName)
		}
		if pod.Spec.EnableServiceLinks == nil || *pod.Spec.EnableServiceLinks {
			t.Errorf("enableServiceLinks must be false: service links add DOCSTREAM_* variables next to the configuration ones")
		}

		claims := map[string]bool{}
		for _, c := range sts.Spec.VolumeClaimTemplates {
			claims[c.Name] = true
		}
		vols := map[string]corev1.Volume{}
		for _, v := range pod.Spec.Volumes {
			vols[v.Name] = v
		}
		psc := pod.Spec.SecurityContext
		if psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot || psc.RunAsUser == nil || *psc.RunAsUser != 10001 {
			t.Errorf("pod securityContext must run as non-root uid 10001")
		}
		var cms, secrets []string
		for _, o := range byKind["ConfigMap"] {
			cms = append(cms, o.name)
		}
		for _, o := range byKind["Secret"] {
			secrets = append(secrets, o.name)
		}
		for _, v := range pod.Spec.Volumes {
			if v.ConfigMap != nil && !slices.Contains(cms, v.ConfigMap.Name) {
				t.Errorf("volume %s: ConfigMap %s is not in k8s/", v.Name, v.ConfigMap.Name)
			}
		}
		if len(pod.Spec.Containers) != 1 {
			t.Fatalf("want one container, have %d", len(pod.Spec.Containers))
		}
		for _, c := range append(pod.Spec.InitContainers, pod.Spec.Containers...) {
			sc := c.SecurityContext
			if sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem ||
				sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
				t.Errorf("container %s: want readOnlyRootFilesystem and no privilege escalation", c.Name)
			}
			if c.Resources.Requests.Memory().IsZero() || c.Resources.Limits.Memory().IsZero() {
				t.Errorf("container %s: set memory requests and limits", c.Name)
			}
			for _, m := range c.VolumeMounts {
				if _, ok := vols[m.Name]; !ok && !claims[m.Name] {
					t.Errorf("container %s mounts %s, which is neither a volume nor a volumeClaimTemplate", c.Name, m.Name)
				}
			}
			for _, ef := range c.EnvFrom {
				if ef.SecretRef != nil && !slices.Contains(secrets, ef.SecretRef.Name) {
					t.Errorf("container %s: envFrom Secret %s is not in k8s/", c.Name, ef.SecretRef.Name)
				}
			}
		}
		c := pod.Spec.Containers[0]
		mounts := map[string]string{}
		for _, m := range c.VolumeMounts {
			mounts[m.MountPath] = m.Name
		}
		for path, claim := range map[string]string{"/home/docstream/data": "data", "/home/docstream/.cursor": "cursor"} {
			if mounts[path] != claim || !claims[claim] {
				t.Errorf("%s must be the replica's own volume (volumeClaimTemplate %s)", path, claim)
			}
		}
		if v, ok := vols[mounts["/tmp"]]; !ok || v.EmptyDir == nil {
			t.Errorf("/tmp must be an emptyDir on the read-only root file system")
		}
		if !slices.ContainsFunc(c.EnvFrom, func(e corev1.EnvFromSource) bool { return e.SecretRef != nil }) {
			t.Errorf("the container takes no environment from a Secret")
		}
		ports := map[string]int32{}
		for _, p := range c.Ports {
			ports[p.Name] = p.ContainerPort
		}
		if ports["http"] != 8080 {
			t.Errorf("container port http = %d, want 8080", ports["http"])
		}
		checkProbe := func(kind string, p *corev1.Probe, path string) {
			if p == nil || p.HTTPGet == nil {
				t.Errorf("%s probe: want an HTTP GET of %s", kind, path)
				return
			}
			if p.HTTPGet.Path != path {
				t.Errorf("%s probe path = %s, want %s", kind, p.HTTPGet.Path, path)
			}
			if !portExists(p.HTTPGet.Port, ports) {
				t.Errorf("%s probe port %s is not a container port", kind, p.HTTPGet.Port.String())
			}
		}
		checkProbe("liveness", c.LivenessProbe, "/healthz")
		checkProbe("readiness", c.ReadinessProbe, "/readyz")
		if c.StartupProbe != nil {
			checkProbe("startup", c.StartupProbe, "/healthz")
		}

		// The grace period covers the preStop pause plus the gateway's drain.
		cfg := gatewayConfigFromConfigMap(t, byKind["ConfigMap"])
		drain, err := time.ParseDuration(fmt.Sprint(cfg["server"]["shutdown_timeout"]))
		if err != nil {
			t.Fatalf("server.shutdown_timeout in the ConfigMap: %v", err)
		}
		var preStop time.Duration
		if c.Lifecycle != nil && c.Lifecycle.PreStop != nil && c.Lifecycle.PreStop.Sleep != nil {
			preStop = time.Duration(c.Lifecycle.PreStop.Sleep.Seconds) * time.Second
		}
		// The gateway closes its HTTP server at most 10 s after the drain.
		grace := time.Duration(*pod.Spec.TerminationGracePeriodSeconds) * time.Second
		if grace <= preStop+drain+10*time.Second {
			t.Errorf("terminationGracePeriodSeconds %s does not cover preStop %s + drain %s + 10 s", grace, preStop, drain)
		}
		// The config file is where the args say.
		args := strings.Join(c.Args, " ")
		if !strings.Contains(args, "--config /etc/docstream/config.yaml") || mounts["/etc/docstream"] != "config" {
			t.Errorf("the container must read the ConfigMap's config.yaml: args %q", args)
		}
		if strings.Contains(args, "--demo") {
			t.Errorf("the Kubernetes manifests run the real agent, not --demo")
		}
		if ws, ok := cfg["agent"]["workspaces"].(map[string]any); ok {
			for name, dir := range ws {
				if s, _ := dir.(string); !strings.HasPrefix(s, "/home/docstream/data/") {
					t.Errorf("workspace %s = %v is not on the replica's data volume", name, dir)
				}
			}
		}
	})

	services := map[string]*corev1.Service{}
	for _, o := range byKind["Service"] {
		services[o.name] = o.svc
	}
	containerPorts := map[string]int32{}
	for _, p := range pod.Spec.Containers[0].Ports {
		containerPorts[p.Name] = p.ContainerPort
	}

	t.Run("services", func(t *testing.T) {
		headless, normal := 0, 0
		for name, s := range services {
			if !matches(s.Spec.Selector, podLabels) {
				t.Errorf("Service %s selects no docstream pod", name)
			}
			for _, p := range s.Spec.Ports {
				if !portExists(p.TargetPort, containerPorts) {
					t.Errorf("Service %s port %s: targetPort %s is not a container port", name, p.Name, p.TargetPort.String())
				}
			}
			if s.Spec.ClusterIP == corev1.ClusterIPNone {
				headless++
			} else {
				normal++
			}
		}
		if headless != 1 || normal != 1 {
			t.Errorf("want one headless and one normal Service, have %d and %d", headless, normal)
		}
	})

	t.Run("ingress", func(t *testing.T) {
		ing := byKind["Ingress"][0].ing
		// Any replica answers any request: no affinity.
		for _, a := range []string{"upstream-hash-by", "affinity"} {
			if got, ok := ing.Annotations["nginx.ingress.kubernetes.io/"+a]; ok {
				t.Errorf("%s = %q: the replicas forward to each other, the Ingress balances plainly", a, got)
			}
		}
		if ing.Annotations["nginx.ingress.kubernetes.io/proxy-buffering"] != "off" {
			t.Errorf("SSE needs proxy-buffering off")
		}
		routes := map[string]bool{}
		for _, r := range ing.Spec.Rules {
			for _, p := range r.HTTP.Paths {
				// Operational endpoints stay inside the cluster.
				for _, internal := range []string{"/metrics", "/healthz", "/readyz"} {
					if ingressPathMatches(p, internal) {
						t.Errorf("the Ingress path %s exposes %s", p.Path, internal)
					}
				}
				for _, public := range []string{"/", "/assets/app.js", "/v1/chat", "/v1/chat/completions", "/v1/models"} {
					if ingressPathMatches(p, public) {
						routes[public] = true
					}
				}
				b := p.Backend.Service
				s, ok := services[b.Name]
				if !ok {
					t.Errorf("Ingress backend %s is not a Service of k8s/", b.Name)
					continue
				}
				if s.Spec.ClusterIP == corev1.ClusterIPNone {
					t.Errorf("Ingress backend %s is the headless Service", b.Name)
				}
				found := false
				for _, sp := range s.Spec.Ports {
					if (b.Port.Name != "" && sp.Name == b.Port.Name) || (b.Port.Number != 0 && sp.Port == b.Port.Number) {
						found = true
					}
				}
				if !found {
					t.Errorf("Ingress backend port %v is not a port of Service %s", b.Port, b.Name)
				}
			}
		}
		for _, public := range []string{"/", "/assets/app.js", "/v1/chat", "/v1/chat/completions", "/v1/models"} {
			if !routes[public] {
				t.Errorf("the Ingress does not route %s", public)
			}
		}
	})

	t.Run("hpa", func(t *testing.T) {
		h := byKind["HorizontalPodAutoscaler"][0].hpa
		ref := h.Spec.ScaleTargetRef
		if ref.Kind != "StatefulSet" || ref.Name != sts.Name || ref.APIVersion != "apps/v1" {
			t.Errorf("HPA targets %s %s/%s, want the StatefulSet %s", ref.APIVersion, ref.Kind, ref.Name, sts.Name)
		}
		if h.Spec.MinReplicas == nil || *h.Spec.MinReplicas > h.Spec.MaxReplicas {
			t.Errorf("HPA min/max replicas are not sane")
		}
		found := false
		for _, m := range h.Spec.Metrics {
			if m.Type == autoscalingv2.PodsMetricSourceType && m.Pods != nil && m.Pods.Metric.Name == "docstream_runs_in_flight" &&
				m.Pods.Target.Type == autoscalingv2.AverageValueMetricType && m.Pods.Target.AverageValue != nil {
				found = true
				cfg := gatewayConfigFromConfigMap(t, byKind["ConfigMap"])
				limit, _ := cfg["limits"]["max_concurrent_runs"].(int)
				if v := m.Pods.Target.AverageValue.Value(); limit > 0 && v >= int64(limit) {
					t.Errorf("HPA target %d runs per pod is not below max_concurrent_runs %d", v, limit)
				}
			}
		}
		if !found {
			t.Errorf("HPA does not scale on the Pods metric docstream_runs_in_flight (AverageValue)")
		}
	})

	t.Run("pdb", func(t *testing.T) {
		p := byKind["PodDisruptionBudget"][0].pdb
		if !labelSelectorMatches(t, p.Spec.Selector, podLabels) {
			t.Errorf("the PodDisruptionBudget selects no docstream pod")
		}
		if p.Spec.MaxUnavailable == nil && p.Spec.MinAvailable == nil {
			t.Errorf("the PodDisruptionBudget sets neither maxUnavailable nor minAvailable")
		}
	})

	t.Run("servicemonitor", func(t *testing.T) {
		sm := byKind["ServiceMonitor"][0].svcmon
		var selected []*corev1.Service
		for _, s := range services {
			if labelSelectorMatches(t, &sm.Spec.Selector, s.Labels) {
				selected = append(selected, s)
			}
		}
		if len(selected) != 1 {
			t.Fatalf("the ServiceMonitor selects %d Services; want exactly one, or replicas are scraped twice", len(selected))
		}
		for _, ep := range sm.Spec.Endpoints {
			if ep.Path != "/metrics" {
				t.Errorf("ServiceMonitor path %q, want /metrics", ep.Path)
			}
			if !slices.ContainsFunc(selected[0].Spec.Ports, func(p corev1.ServicePort) bool { return p.Name == ep.Port }) {
				t.Errorf("ServiceMonitor port %q is not a port of Service %s", ep.Port, selected[0].Name)
			}
		}
		if selected[0].Name != "docstream" {
			t.Errorf("the scraped Service is %s; the alert rules expect job=\"docstream\"", selected[0].Name)
		}
	})

	t.Run("networkpolicy", func(t *testing.T) {
		np := byKind["NetworkPolicy"][0].netpol
		if !labelSelectorMatches(t, &np.Spec.PodSelector, podLabels) {
			t.Errorf("the NetworkPolicy selects no docstream pod")
		}
		if !slices.Contains(np.Spec.PolicyTypes, networkingv1.PolicyTypeIngress) || !slices.Contains(np.Spec.PolicyTypes, networkingv1.PolicyTypeEgress) {
			t.Errorf("the NetworkPolicy must restrict both Ingress and Egress")
		}
		namespaces := map[string]bool{}
		for _, r := range np.Spec.Ingress {
			for _, from := range r.From {
				if from.NamespaceSelector == nil && from.PodSelector != nil && labelSelectorMatches(t, from.PodSelector, podLabels) {
					continue // the other replicas
				}
				if from.NamespaceSelector == nil || from.IPBlock != nil {
					t.Errorf("ingress rule allows more than whole namespaces: %+v", from)
					continue
				}
				for _, v := range from.NamespaceSelector.MatchLabels {
					namespaces[v] = true
				}
			}
			for _, p := range r.Ports {
				if p.Port == nil || !portExists(*p.Port, containerPorts) {
					t.Errorf("ingress rule port %v is not a container port", p.Port)
				}
			}
		}
		if !namespaces["ingress-nginx"] || !namespaces["monitoring"] {
			t.Errorf("ingress must come from the ingress controller's and Prometheus' namespaces, have %v", namespaces)
		}
		egress := map[string]bool{}
		for _, r := range np.Spec.Egress {
			for _, p := range r.Ports {
				egress[fmt.Sprintf("%s/%s", *p.Protocol, p.Port.String())] = true
			}
		}
		for _, want := range []string{"UDP/53", "TCP/53", "TCP/443", "TCP/5432", "TCP/8080"} {
			if !egress[want] {
				t.Errorf("egress does not allow %s", want)
			}
		}
		if len(egress) != 5 {
			t.Errorf("egress allows more than DNS, PostgreSQL, the replicas and 443: %v", egress)
		}
	})

	t.Run("secret", func(t *testing.T) {
		s := byKind["Secret"][0].secret
		if len(s.Data) > 0 {
			t.Errorf("the Secret template has data: values; use stringData placeholders only")
		}
		for _, key := range []string{"CURSOR_API_KEY", "DOCSTREAM_AUTH_API_KEYS", "DOCSTREAM_STORE_DSN", "DOCSTREAM_CLUSTER_SECRET"} {
			v, ok := s.StringData[key]
			if !ok {
				t.Errorf("the Secret template has no %s", key)
				continue
			}
			if !strings.HasPrefix(v, "<REPLACE_") || !strings.HasSuffix(v, ">") {
				t.Errorf("%s = %q: the template must hold a <REPLACE_...> placeholder, never a value", key, v)
			}
		}
	})

	t.Run("advertise", func(t *testing.T) {
		sts := byKind["StatefulSet"][0].sts
		env := sts.Spec.Template.Spec.Containers[0].Env
		pod := slices.IndexFunc(env, func(e corev1.EnvVar) bool { return e.Name == "POD_NAME" })
		adv := slices.IndexFunc(env, func(e corev1.EnvVar) bool { return e.Name == "DOCSTREAM_CLUSTER_ADVERTISE_URL" })
		want := "http://$(POD_NAME)." + sts.Spec.ServiceName + ":8080"
		if pod < 0 || adv < pod || env[adv].Value != want {
			t.Errorf("each pod must advertise %s, after POD_NAME is set; env %v", want, env)
		}
	})

	t.Run("configmap", func(t *testing.T) {
		cfg := gatewayConfigFromConfigMap(t, byKind["ConfigMap"])
		if cfg["store"]["driver"] != "postgres" || cfg["store"]["dsn"] != nil {
			t.Errorf("the store must be PostgreSQL, its DSN from the Secret; have %v", cfg["store"])
		}
		if cfg["cluster"]["secret"] != nil || cfg["cluster"]["advertise_url"] != nil {
			t.Errorf("cluster.secret comes from the Secret and advertise_url from each pod's name; have %v", cfg["cluster"])
		}
		if cfg["server"]["addr"] != "0.0.0.0:8080" {
			t.Errorf("server.addr = %v, want 0.0.0.0:8080", cfg["server"]["addr"])
		}
	})
}

// ingressPathMatches reports whether an Ingress path sends a request for
// the given URL path to its backend (Prefix matches whole path elements).
func ingressPathMatches(p networkingv1.HTTPIngressPath, path string) bool {
	switch {
	case p.PathType == nil || *p.PathType == networkingv1.PathTypeImplementationSpecific:
		return strings.HasPrefix(path, p.Path)
	case *p.PathType == networkingv1.PathTypeExact:
		return path == p.Path
	}
	prefix := strings.TrimSuffix(p.Path, "/")
	return prefix == "" || path == prefix || strings.HasPrefix(path, prefix+"/")
}

func portExists(p intstr.IntOrString, ports map[string]int32) bool {
	if p.Type == intstr.String {
		_, ok := ports[p.StrVal]
		return ok
	}
	for _, n := range ports {
		if n == p.IntVal {
			return true
		}
	}
	return false
}

func gatewayConfigFromConfigMap(t *testing.T, cms []k8sObject) map[string]map[string]any {
	t.Helper()
	for _, o := range cms {
		if data, ok := o.cm.Data["config.yaml"]; ok {
			return checkGatewayConfig(t, o.file+" config.yaml", []byte(data))
		}
	}
	t.Fatalf("no ConfigMap with a config.yaml")
	return nil
}
