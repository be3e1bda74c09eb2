package agent

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

func TestAmbiguous(t *testing.T) {
	pod := func(app string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: app, Labels: map[string]string{"app": app}}}
	}
	web := labels.SelectorFromSet(labels.Set{"app": "web"})
	for _, tc := range []struct {
		name   string
		known  map[string]labels.Selector
		pods   []*corev1.Pod
		want   string
		wantOK bool
	}{
		{name: "alone", pods: []*corev1.Pod{pod("web")}},
		{name: "another selects other pods", known: map[string]labels.Selector{"ns/db": labels.SelectorFromSet(labels.Set{"app": "db"})}, pods: []*corev1.Pod{pod("web")}},
		{name: "another namespace", known: map[string]labels.Selector{"other/b": web}, pods: []*corev1.Pod{pod("web")}},
		{name: "no pods", known: map[string]labels.Selector{"ns/b": web}},
		{name: "two select the same pods", known: map[string]labels.Selector{"ns/b": web}, pods: []*corev1.Pod{pod("web")}, wantOK: true,
			want: "pods by selector app=web are controlled by more than one HPA (e.g. [ns/a ns/b])"},
		{name: "three name two", known: map[string]labels.Selector{"ns/c": web, "ns/b": web}, pods: []*corev1.Pod{pod("web")}, wantOK: true,
			want: "pods by selector app=web are controlled by more than one HPA (e.g. [ns/a ns/b])"},
		{name: "an HPA and an Autoscaler", known: map[string]labels.Selector{"hpa:ns/b": web}, pods: []*corev1.Pod{pod("web")}, wantOK: true,
			want: "pods by selector app=web are controlled by more than one HPA (e.g. [ns/a ns/b])"},
		{name: "an HPA of another namespace", known: map[string]labels.Selector{"hpa:other/b": web}, pods: []*corev1.Pod{pod("web")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &Controller{selectors: map[string]labels.Selector{}}
			for k, s := range tc.known {
				c.selectors[k] = s
			}
			got, ok := c.ambiguous(objectKey{namespace: "ns", name: "a"}, "app=web", web, tc.pods)
			if got != tc.want || ok != tc.wantOK {
				t.Errorf("ambiguous = %q, %v; want %q, %v", got, ok, tc.want, tc.wantOK)
			}
			if c.selectors["ns/a"] == nil {
				t.Error("the autoscaler's own selector was not recorded")
			}
		})
	}
}
