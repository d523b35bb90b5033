package config

import (
	"fmt"
	"reflect"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/switchboard-gateway/switchboard/channels"
	"github.com/switchboard-gateway/switchboard/channels/registry"
)

// newSections returns every registered platform's section with its
// package's defaults.
func newSections() map[string]channels.Section {
	out := make(map[string]channels.Section, len(registry.All))
	for _, d := range registry.All {
		out[d.Name] = d.NewConfig()
	}
	return out
}

// Section returns c's section of type T (a pointer to a channel package's
// Config, such as *telegram.Config), to read or change. A Config built by
// hand without it gets a zero section.
func Section[T channels.Section](c *Config) T {
	if s := channels.SectionOf[T](c.Channels.Sections); !reflect.ValueOf(&s).Elem().IsZero() {
		return s
	}
	want := reflect.TypeFor[T]()
	for _, d := range registry.All {
		if reflect.TypeOf(d.NewConfig()) == want {
			s := reflect.New(want.Elem()).Interface().(T)
			if c.Channels.Sections == nil {
				c.Channels.Sections = map[string]channels.Section{}
			}
			c.Channels.Sections[d.Name] = s
			return s
		}
	}
	panic(fmt.Sprintf("config: %s is not the section of a registered channel (channels/registry)", want))
}

// Section returns the platform section called name, or nil.
func (c *Channels) Section(name string) channels.Section {
	return c.Sections[name]
}

// Enabled reports whether the platform called name is enabled.
func (c *Channels) Enabled(name string) bool {
	s := c.Sections[name]
	return s != nil && s.Settings().Enabled
}

// sectionTypes are the registered sections' struct types by name.
func sectionTypes() map[string]reflect.Type {
	out := map[string]reflect.Type{}
	for _, d := range registry.All {
		out[d.Name] = d.SectionType()
	}
	return out
}

var channelsType = reflect.TypeFor[Channels]()

// channelsFields is Channels without the sections: what yaml decodes and
// encodes on its own.
type channelsFields Channels

// UnmarshalYAML decodes the fixed keys, then each registered section onto
// its current value (keeping the defaults the file does not set). The
// walker has checked the keys and types before.
func (c *Channels) UnmarshalYAML(n *yaml.Node) error {
	if err := n.Decode((*channelsFields)(c)); err != nil {
		return err
	}
	n = resolveAlias(n)
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := resolveAlias(n.Content[i]), resolveAlias(n.Content[i+1])
		d, ok := registry.Lookup(k.Value)
		if !ok || isNull(v) {
			continue
		}
		if c.Sections == nil {
			c.Sections = map[string]channels.Section{}
		}
		s := c.Sections[d.Name]
		if s == nil {
			s = d.NewConfig()
			c.Sections[d.Name] = s
		}
		if err := v.Decode(s); err != nil {
			return fmt.Errorf("channels.%s: %w", d.Name, err)
		}
	}
	return nil
}

// MarshalYAML writes the sections after console, in the registry's order,
// as the keys are listed in the schema.
func (c Channels) MarshalYAML() (any, error) {
	var fixed yaml.Node
	if err := fixed.Encode((*channelsFields)(&c)); err != nil {
		return nil, err
	}
	out := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
	out.Content = append(out.Content, fixed.Content[:2]...) // console
	for _, d := range registry.All {
		s := c.Sections[d.Name]
		if s == nil {
			continue
		}
		var v yaml.Node
		if err := v.Encode(s); err != nil {
			return nil, err
		}
		out.Content = append(out.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: d.Name}, &v)
	}
	out.Content = append(out.Content, fixed.Content[2:]...)
	return out, nil
}

// cloneSections returns a deep copy of the sections, so that a copy of a
// Config can change its own.
func cloneSections(in map[string]channels.Section) map[string]channels.Section {
	if in == nil {
		return nil
	}
	out := make(map[string]channels.Section, len(in))
	for name, s := range in {
		out[name] = deepCopy(reflect.ValueOf(s)).Interface().(channels.Section)
	}
	return out
}

// Clone returns a deep copy of the channel settings.
func (c Channels) Clone() Channels {
	c.Sections = cloneSections(c.Sections)
	return c
}

// deepCopy copies v, with new pointers, slices and maps.
func deepCopy(v reflect.Value) reflect.Value {
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			return v
		}
		p := reflect.New(v.Type().Elem())
		p.Elem().Set(deepCopy(v.Elem()))
		return p
	case reflect.Struct:
		out := reflect.New(v.Type()).Elem()
		out.Set(v)
		for i := range v.NumField() {
			if out.Field(i).CanSet() {
				out.Field(i).Set(deepCopy(v.Field(i)))
			}
		}
		return out
	case reflect.Slice:
		if v.IsNil() {
			return v
		}
		out := reflect.MakeSlice(v.Type(), v.Len(), v.Len())
		for i := range v.Len() {
			out.Index(i).Set(deepCopy(v.Index(i)))
		}
		return out
	case reflect.Map:
		if v.IsNil() {
			return v
		}
		out := reflect.MakeMapWithSize(v.Type(), v.Len())
		for it := v.MapRange(); it.Next(); {
			out.SetMapIndex(it.Key(), deepCopy(it.Value()))
		}
		return out
	case reflect.Interface:
		if v.IsNil() {
			return v
		}
		out := reflect.New(v.Type()).Elem()
		out.Set(deepCopy(v.Elem()))
		return out
	}
	return v
}

// stringField is one string setting found by eachString.
type stringField struct {
	key   string // its key path, "channels.telegram.token"
	field reflect.StructField
	p     *string
}

// eachString calls fn for every string setting in c's structs (the
// registered sections included, lists and maps not), with its key path:
// what the secret, URL and environment tags are read from.
func (c *Config) eachString(fn func(stringField)) {
	var walk func(v reflect.Value, prefix string)
	walk = func(v reflect.Value, prefix string) {
		t := v.Type()
		for i := range t.NumField() {
			f := t.Field(i)
			name, opts, _ := strings.Cut(f.Tag.Get("yaml"), ",")
			if !f.IsExported() || name == "-" && f.Type != reflect.TypeFor[map[string]channels.Section]() {
				continue
			}
			fv := v.Field(i)
			key := joinKey(prefix, name)
			if opts == "inline" {
				key = prefix
			}
			switch {
			case t == channelsType && f.Name == "Sections":
				for _, d := range registry.All {
					if s := c.Channels.Sections[d.Name]; s != nil {
						walk(reflect.ValueOf(s).Elem(), joinKey(prefix, d.Name))
					}
				}
			case f.Type.Kind() == reflect.String:
				fn(stringField{key, f, fv.Addr().Interface().(*string)})
			case f.Type.Kind() == reflect.Struct && f.Type != durationType:
				walk(fv, key)
			case f.Type.Kind() == reflect.Pointer && f.Type.Elem().Kind() == reflect.Struct && !fv.IsNil():
				walk(fv.Elem(), key)
			}
		}
	}
	walk(reflect.ValueOf(c).Elem(), "")
}

// FallbackEnv returns the environment variable that the setting key
// ("channels.telegram.token") falls back to when empty, or "".
func FallbackEnv(key string) string {
	env := ""
	Default().eachString(func(f stringField) {
		if f.key == key {
			env = f.field.Tag.Get("env")
		}
	})
	return env
}
