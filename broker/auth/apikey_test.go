package auth

import (
	"errors"
	"strings"
	"testing"
)

func TestAPIKey(t *testing.T) {
	key, id, hash, err := NewAPIKey()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(key, "sk_"+id+"_") || len(key) != 52 {
		t.Fatalf("key %q (id %q) is not sk_<id>_<secret>", key, id)
	}
	got, err := ParseAPIKey(key)
	if err != nil || got != id {
		t.Fatalf("ParseAPIKey = %q, %v; want %q", got, err, id)
	}
	if !CheckAPIKey(key, hash) {
		t.Fatal("CheckAPIKey rejects the key")
	}
	other, _, _, err := NewAPIKey()
	if err != nil {
		t.Fatal(err)
	}
	if other == key || CheckAPIKey(other, hash) {
		t.Fatal("another key matches")
	}
	tampered := key[:len(key)-1] + map[bool]string{true: "b", false: "a"}[strings.HasSuffix(key, "a")]
	if CheckAPIKey(tampered, hash) {
		t.Fatal("a tampered key matches")
	}
	if CheckAPIKey(key, hash[:16]) || CheckAPIKey(key, nil) {
		t.Fatal("a short hash matches")
	}
}

func TestParseAPIKeyRefusals(t *testing.T) {
	key, _, _, err := NewAPIKey()
	if err != nil {
		t.Fatal(err)
	}
	bad := []string{
		"",
		"sk_",
		strings.Replace(key, "sk_", "pk_", 1),
		strings.ToUpper(key),
		key + "a",
		key[:len(key)-1],
		strings.Replace(key, "_", "-", 2),
		key[:10] + "1" + key[11:],            // '1' is not in the alphabet
		key[:3] + key[4:20] + "_" + key[20:], // separator moved
	}
	for _, k := range bad {
		if _, err := ParseAPIKey(k); !errors.Is(err, ErrInvalidAPIKey) {
			t.Errorf("ParseAPIKey(%q) = %v, want ErrInvalidAPIKey", k, err)
		}
	}
}
