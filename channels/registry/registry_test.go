package registry

import (
	"reflect"
	"regexp"
	"testing"

	"github.com/switchboard-gateway/switchboard/channels"
)

// A reload applies a section's fields tagged reload:"access" (package
// gateway, channels.CopyAccess): every field Access reads must be one of
// them, or SIGHUP would leave that allowlist as it was; and each tagged
// field must matter to Access.
func TestAccessReadsOnlyReloadedFields(t *testing.T) {
	for _, d := range All {
		base := d.NewConfig().Access()
		for _, f := range leafFields(d.SectionType(), nil) {
			s := d.NewConfig()
			v := reflect.ValueOf(s).Elem().FieldByIndex(f.Index)
			if !change(v) {
				continue
			}
			changed := !reflect.DeepEqual(s.Access(), base)
			switch tagged := f.Tag.Get("reload") == "access"; {
			case changed && !tagged:
				t.Errorf("%s: Access reads %s, which is not tagged reload:\"access\"", d.Name, f.Name)
			case !changed && tagged:
				t.Errorf("%s: %s is tagged reload:\"access\" but Access does not read it", d.Name, f.Name)
			}
		}
	}
}

// leafFields lists a struct's fields, those of embedded structs instead
// of the struct itself.
func leafFields(t reflect.Type, index []int) []reflect.StructField {
	var out []reflect.StructField
	for i := range t.NumField() {
		f := t.Field(i)
		f.Index = append(append([]int(nil), index...), i)
		if f.Anonymous && f.Type.Kind() == reflect.Struct {
			out = append(out, leafFields(f.Type, f.Index)...)
			continue
		}
		out = append(out, f)
	}
	return out
}

// change sets v to a value other than its current one, if it knows how.
func change(v reflect.Value) bool {
	switch v.Kind() {
	case reflect.Bool:
		v.SetBool(!v.Bool())
	case reflect.String:
		v.SetString(v.String() + "x")
	case reflect.Int, reflect.Int64:
		v.SetInt(v.Int() + 7)
	case reflect.Slice:
		if v.Type().Elem().Kind() != reflect.String {
			return false
		}
		v.Set(reflect.ValueOf([]string{"12345"}))
	default:
		return false
	}
	return true
}

var nameRE = regexp.MustCompile(`^[a-z][a-z0-9]*$`)

// Names are configuration keys, flag prefixes and stored channel names:
// lowercase, unique, and none of the fixed channels.
func TestNames(t *testing.T) {
	seen := map[string]bool{"console": true, "http": true}
	for _, d := range All {
		if !nameRE.MatchString(d.Name) || seen[d.Name] {
			t.Errorf("%q: want a new lowercase name", d.Name)
		}
		seen[d.Name] = true
		if d.Title == "" || d.NewConfig == nil || d.Build == nil {
			t.Errorf("%s: Title, NewConfig and Build are required", d.Name)
		}
		if _, ok := d.NewConfig().(channels.Section); !ok {
			t.Errorf("%s: NewConfig is not a section", d.Name)
		}
	}
}
