package nodeconf

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestModeValidate: each mode accepts empty (the default) and its values,
// and refuses anything else naming what it is and what is allowed.
func TestModeValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"network dir default", NetworkDirMode("").Validate(), ""},
		{"network dir load", NetworkDirLoad.Validate(), ""},
		{"network dir ignore", NetworkDirIgnore.Validate(), ""},
		{"network dir other", NetworkDirMode("Load").Validate(), `network dir mode "Load": must be load or ignore`},
		{"delegate versions default", DelegateVersionsMode("").Validate(), ""},
		{"delegate versions auto", DelegateVersionsAuto.Validate(), ""},
		{"delegate versions primary", DelegateVersionsPrimary.Validate(), ""},
		{"delegate versions other", DelegateVersionsMode("newest").Validate(), `delegate versions "newest": must be auto or primary`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.want == "" {
				assert.NoError(t, tc.err)
				return
			}
			assert.EqualError(t, tc.err, tc.want)
		})
	}
}
