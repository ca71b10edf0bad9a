// Command gojson-table writes the field table that omed.api.gojson encodes pod specs with.
//
// The revision hash of an InferenceReplica, and the content hash of a runtime revision, are taken
// over bytes that upstream OME produces with Go's encoding/json from typed structs: fields in
// struct declaration order, omitempty and omitzero as tagged, embedded structs promoted in
// place. This program walks corev1.PodSpec, ObjectMeta and OME's ServingRuntimeSpec (declared
// in ./ome, as OME's module is not in the cache) by reflection and writes, for every struct type
// reached, its JSON fields in encoding order with their flags and value types, so the Python
// encoder follows Go's rules from data instead of from a hand-copied list.

//
// Run from this directory (offline, from the module cache):
//
//	GOFLAGS=-mod=mod GOPROXY=off go run . > ../../omed/api/gojson/k8s_types.json
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"reflect"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"omed.local/tools/gojson-table/ome"
)

// Types with their own MarshalJSON that the Python side encodes by hand.
var special = map[reflect.Type]string{
	reflect.TypeOf(resource.Quantity{}):  "quantity",
	reflect.TypeOf(intstr.IntOrString{}): "intorstring",
	reflect.TypeOf(metav1.Time{}):        "time",
}

var (
	marshaler     = reflect.TypeOf((*json.Marshaler)(nil)).Elem()
	textMarshaler = reflect.TypeOf((*interface{ MarshalText() ([]byte, error) })(nil)).Elem()
	isZeroer      = reflect.TypeOf((*interface{ IsZero() bool })(nil)).Elem()
)

type field struct {
	Name      string `json:"name"`
	Type      string `json:"type"`
	OmitEmpty bool   `json:"omitempty,omitempty"`
	OmitZero  bool   `json:"omitzero,omitempty"`
}

type table struct {
	Comment string             `json:"comment"`
	Modules map[string]string  `json:"modules"`
	Roots   map[string]string  `json:"roots"`
	Types   map[string][]field `json:"types"`
}

func typeName(t reflect.Type) string {
	pkg := t.PkgPath()
	pkg = strings.TrimPrefix(pkg, "k8s.io/api/")
	pkg = strings.TrimPrefix(pkg, "k8s.io/apimachinery/pkg/apis/")
	pkg = strings.TrimPrefix(pkg, "omed.local/tools/gojson-table/")
	return pkg + "." + t.Name()
}

type walker struct {
	types map[string][]field
}

func (w *walker) ref(t reflect.Type) string {
	if name, ok := special[t]; ok {
		return name
	}
	if t.Kind() == reflect.Pointer {
		return "ptr:" + w.ref(t.Elem())
	}
	if t.Implements(marshaler) || reflect.PointerTo(t).Implements(marshaler) ||
		t.Implements(textMarshaler) || reflect.PointerTo(t).Implements(textMarshaler) {
		return "opaque:" + typeName(t)
	}
	switch t.Kind() {
	case reflect.String:
		return "string"
	case reflect.Bool:
		return "bool"
	case reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64, reflect.Int:
		return fmt.Sprintf("int%d", t.Bits())
	case reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uint:
		return fmt.Sprintf("uint%d", t.Bits())
	case reflect.Float32, reflect.Float64:
		return fmt.Sprintf("float%d", t.Bits())
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 {
			return "bytes"
		}
		return "slice:" + w.ref(t.Elem())
	case reflect.Map:
		if t.Key().Kind() != reflect.String {
			return "opaque:" + t.String()
		}
		return "map:" + w.ref(t.Elem())
	case reflect.Struct:
		name := typeName(t)
		if _, seen := w.types[name]; !seen {
			w.types[name] = nil // mark before recursing: types refer to themselves
			w.types[name] = w.fields(t)
			if t.Implements(isZeroer) || reflect.PointerTo(t).Implements(isZeroer) {
				panic("struct with IsZero outside the special types: " + name)
			}
		}
		return "struct:" + name
	}
	return "opaque:" + t.String()
}

// fields lists t's JSON fields in encoding order, promoting untagged embedded structs in place
// (encoding/json orders fields by index sequence, so promoted fields sit where the embedding is).
func (w *walker) fields(t reflect.Type) []field {
	var out []field
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if f.Anonymous && name == "" {
			ft := f.Type
			if ft.Kind() == reflect.Pointer {
				panic("embedded pointer in " + typeName(t))
			}
			if ft.Kind() == reflect.Struct {
				out = append(out, w.fields(ft)...)
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		fl := field{Name: name, Type: w.ref(f.Type)}
		for _, opt := range strings.Split(opts, ",") {
			switch opt {
			case "omitempty":
				fl.OmitEmpty = true
			case "omitzero":
				fl.OmitZero = true
			case "string", "inline", "":
			default:
				panic("unknown json option " + opt + " on " + typeName(t) + "." + f.Name)
			}
			if opt == "string" {
				panic("json ,string option on " + typeName(t) + "." + f.Name)
			}
		}
		out = append(out, fl)
	}
	seen := map[string]bool{}
	for _, f := range out {
		if seen[f.Name] {
			panic("duplicate JSON name " + f.Name + " in " + typeName(t))
		}
		seen[f.Name] = true
	}
	return out
}

func main() {
	w := &walker{types: map[string][]field{}}
	roots := map[string]string{
		"PodSpec":    w.ref(reflect.TypeOf(corev1.PodSpec{})),
		"ObjectMeta": w.ref(reflect.TypeOf(metav1.ObjectMeta{})),
		// OME's runtime spec: declarations in ./ome, Kubernetes types reached from it real.
		"ServingRuntimeSpec": w.ref(reflect.TypeOf(ome.ServingRuntimeSpec{})),
	}
	names := make([]string, 0, len(w.types))
	for name := range w.types {
		names = append(names, name)
	}
	sort.Strings(names)
	out := table{
		Comment: "Generated by tools/gojson-table from the Go types; do not edit.",
		Modules: map[string]string{
			"k8s.io/api":          "v0.36.3",
			"k8s.io/apimachinery": "v0.36.3",
			"ome.io/v1beta1":      "declared in tools/gojson-table/ome from upstream's sources",
		},
		Roots: roots,
		Types: w.types,
	}
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", " ")
	if err := enc.Encode(out); err != nil {
		panic(err)
	}
}
