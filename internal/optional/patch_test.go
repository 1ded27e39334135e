package optional

import (
	"encoding/json"
	"testing"
)

// A merge patch tells a member left out from one set to null.
func TestPatchTellsLeftOutFromNull(t *testing.T) {
	var b struct {
		A Patch[int32]  `json:"a,omitzero"`
		B Patch[int32]  `json:"b,omitzero"`
		C Patch[string] `json:"c,omitzero"`
	}
	if err := json.Unmarshal([]byte(`{"b": null, "c": "x"}`), &b); err != nil {
		t.Fatal(err)
	}
	if b.A.Set || !b.B.Set || b.B.Value != nil || !b.C.Set || *b.C.Value != "x" {
		t.Fatalf("decoded %+v", b)
	}
	out, err := json.Marshal(b)
	if err != nil || string(out) != `{"b":null,"c":"x"}` {
		t.Fatalf("encoded %s (%v)", out, err)
	}
	if err := json.Unmarshal([]byte(`{"a": "one"}`), &b); err == nil {
		t.Fatal("a string taken as an int32")
	}
}
