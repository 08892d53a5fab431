package testenv

import "testing"

func TestIsFerretDBBuildInfo(t *testing.T) {
	for _, tc := range []struct {
		name string
		info map[string]any
		want bool
	}{
		{"mongodb", map[string]any{"version": "7.0.14", "gitVersion": "abc", "ok": 1.0}, false},
		{"ferretdb v1", map[string]any{"version": "7.0.42", "ferretdbVersion": "v1.24.2", "ferretdbFeatures": map[string]any{}}, true},
		{"ferretdb v2", map[string]any{"version": "7.0.77", "ferretdb": map[string]any{"version": "v2.1.0"}}, true},
		{"empty", nil, false},
	} {
		if got := IsFerretDBBuildInfo(tc.info); got != tc.want {
			t.Errorf("%s: IsFerretDBBuildInfo = %v, want %v", tc.name, got, tc.want)
		}
	}
}
