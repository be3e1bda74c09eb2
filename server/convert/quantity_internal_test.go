package convert

import (
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/labels"
)

// FuzzPlainMilli: wherever the fast path takes a quantity, its value is
// the one resource.ParseQuantity gives; the seeds also pin which
// spellings it takes.
func FuzzPlainMilli(f *testing.F) {
	for _, tc := range []struct {
		s    string
		fast bool
	}{
		{"250m", true}, {"3", true}, {"0", true}, {"0m", true}, {"007", true}, {"999999999999999", true},
		{"999999999999999m", true}, {"1000000000000000", false}, {"", false}, {"m", false}, {"-1", false},
		{"+1", false}, {"1.5", false}, {"1e3", false}, {" 1", false}, {"1mm", false},
		{"1k", true}, {"2M", true}, {"3G", true}, {"4T", true}, {"9P", true}, {"10P", false}, {"9223T", true}, {"9224T", false},
		{"1E", false}, {"512Ki", true}, {"512Mi", true}, {"60Mi", true}, {"1Gi", true}, {"3Ti", true}, {"8Pi", true},
		{"9Pi", false}, {"1Ei", false}, {"1K", false}, {"1mi", false}, {"1Mi ", false}, {"1.5Gi", false}, {"Mi", false},
		{"9223372036854k", true}, {"9223372036855k", false}, {"999999999999999M", false}, {"0Pi", true}, {"1ki", false}, {"1i", false},
	} {
		if _, ok := plainMilli(tc.s); ok != tc.fast {
			f.Errorf("plainMilli(%q) took the fast path: %v, want %v", tc.s, ok, tc.fast)
		}
		f.Add(tc.s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, ok := plainMilli(s)
		if !ok {
			return
		}
		q, err := resource.ParseQuantity(s)
		if err != nil {
			t.Fatalf("plainMilli(%q) = %d, but ParseQuantity fails: %v", s, v, err)
		}
		if want := q.MilliValue(); v != want {
			t.Fatalf("plainMilli(%q) = %d, ParseQuantity's milli-value %d", s, v, want)
		}
	})
}

// FuzzPlainSelector: every selector the fast path takes, labels.Parse
// accepts; the seeds also pin which spellings it takes.
func FuzzPlainSelector(f *testing.F) {
	long := "a123456789b123456789c123456789d123456789e123456789f123456789xyz" // 63
	for _, tc := range []struct {
		s    string
		fast bool
	}{
		{"app=web", true}, {"app=web,tier=front-end", true}, {"app.kubernetes.io_name=my-app.v1", true},
		{"a=b,a=c", true}, {"A1=Z9", true}, {long + "=" + long, true}, {long + "0=a", false}, {"a=" + long + "0", false},
		{"", false}, {"app", false}, {"app=", false}, {"=web", false}, {"app==web", false}, {"app!=web", false},
		{"app=web,", false}, {",app=web", false}, {"app = web", false}, {"app=-web", false}, {"app=web-", false},
		{"-app=web", false}, {"app.=web", false}, {"in=a", false}, {"a=in", false}, {"notin=a", false}, {"a=notin", false},
		{"app in (web)", false}, {"example.com/app=web", false}, {"app=w/b", false}, {"app=wéb", false}, {"!app", false},
		{"app=web=x", false}, {"a=b,,c=d", false}, {"In=a", true}, {"a=NOTIN", true},
	} {
		if got := plainSelector(tc.s); got != tc.fast {
			f.Errorf("plainSelector(%q) = %v, want %v", tc.s, got, tc.fast)
		}
		f.Add(tc.s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if !plainSelector(s) {
			return
		}
		if _, err := labels.Parse(s); err != nil {
			t.Fatalf("plainSelector(%q) = true, but labels.Parse fails: %v", s, err)
		}
	})
}
