package nodeconf

import (
	"fmt"
	"strings"
)

// oneOf accepts v when it is empty (the default) or one of allowed, else
// it names what and the values allowed: "<what> "x": must be a or b".
func oneOf[T ~string](what string, v T, allowed ...T) error {
	if v == "" {
		return nil
	}
	names := make([]string, len(allowed))
	for i, a := range allowed {
		if v == a {
			return nil
		}
		names[i] = string(a)
	}
	return fmt.Errorf("%s %q: must be %s", what, string(v), strings.Join(names, " or "))
}
