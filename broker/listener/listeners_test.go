package listener

import (
	"reflect"
	"strings"
	"testing"
)

func TestParseListeners(t *testing.T) {
	for _, tc := range []struct {
		name, spec, pmap string
		want             []Listener
	}{
		{"two protocols", "PLAINTEXT://127.0.0.1:9092,SASL_SSL://0.0.0.0:9093", "",
			[]Listener{{"PLAINTEXT", Plaintext, "127.0.0.1", 9092}, {"SASL_SSL", SASLSSL, "0.0.0.0", 9093}}},
		{"all four", "PLAINTEXT://h:1,SSL://h:2,SASL_PLAINTEXT://h:3,SASL_SSL://h:4", "",
			[]Listener{{"PLAINTEXT", Plaintext, "h", 1}, {"SSL", SSL, "h", 2}, {"SASL_PLAINTEXT", SASLPlaintext, "h", 3}, {"SASL_SSL", SASLSSL, "h", 4}}},
		{"custom names", "CLIENT://:9092,REPLICATION://broker-1.internal:9094", "CLIENT:SASL_SSL,REPLICATION:SSL",
			[]Listener{{"CLIENT", SASLSSL, "", 9092}, {"REPLICATION", SSL, "broker-1.internal", 9094}}},
		{"map and protocol names mixed", "client://:9092,PLAINTEXT://:9093", " client : sasl_ssl ",
			[]Listener{{"CLIENT", SASLSSL, "", 9092}, {"PLAINTEXT", Plaintext, "", 9093}}},
		{"map renames a protocol name", "SSL://:9093", "SSL:SASL_SSL",
			[]Listener{{"SSL", SASLSSL, "", 9093}}},
		{"ipv6", "PLAINTEXT://[::1]:9092,SSL://[::]:9093", "",
			[]Listener{{"PLAINTEXT", Plaintext, "::1", 9092}, {"SSL", SSL, "::", 9093}}},
		{"ipv6 zone", "PLAINTEXT://[fe80::1%eth0]:9092", "",
			[]Listener{{"PLAINTEXT", Plaintext, "fe80::1%eth0", 9092}}},
		{"lower-case name, spaces, trailing comma", " plaintext://localhost:9092 , ", "",
			[]Listener{{"PLAINTEXT", Plaintext, "localhost", 9092}}},
		{"port 0 twice", "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0", "",
			[]Listener{{"PLAINTEXT", Plaintext, "127.0.0.1", 0}, {"SSL", SSL, "127.0.0.1", 0}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseListeners(tc.spec, tc.pmap)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

func TestParseListenersErrors(t *testing.T) {
	for _, tc := range []struct {
		name, spec, pmap, want string
	}{
		{"empty", "", "", `listeners: none given (want NAME://host:port, ...)`},
		{"only commas", " , ,", "", `listeners: none given`},
		{"no scheme", "127.0.0.1:9092", "", `listeners: "127.0.0.1:9092": want NAME://host:port`},
		{"empty name", "://h:1", "", `listeners: "://h:1": empty listener name`},
		{"bad name", "PLAIN.TEXT://h:1", "", `listener name "PLAIN.TEXT" may hold only letters, digits, '_' and '-'`},
		{"unknown protocol", "TLS://h:1", "", `listeners: "TLS://h:1": listener name TLS is not a security protocol (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL) and the listener security protocol map does not name it`},
		{"custom name not mapped", "CLIENT://h:1", "OTHER:SSL", `listener name CLIENT is not a security protocol`},
		{"missing port", "PLAINTEXT://localhost", "", `listeners: "PLAINTEXT://localhost": missing port`},
		{"empty port", "PLAINTEXT://localhost:", "", `"PLAINTEXT://localhost:": missing port`},
		{"missing host:port", "PLAINTEXT://", "", `missing host:port after ://`},
		{"ipv6 missing port", "PLAINTEXT://[::1]", "", `"PLAINTEXT://[::1]": missing port`},
		{"ipv6 without brackets", "PLAINTEXT://::1:9092", "", `an IPv6 address must be in brackets, as [::1]:9092`},
		{"ipv4 in brackets", "PLAINTEXT://[127.0.0.1]:9092", "", `"127.0.0.1" in brackets is not an IPv6 address`},
		{"unclosed bracket", "PLAINTEXT://[::1:9092", "", `'[' without ']' around the IPv6 address`},
		{"junk after bracket", "PLAINTEXT://[::1]9092", "", `want ':' and the port after ']', got "9092"`},
		{"port not a number", "PLAINTEXT://h:x92", "", `port "x92" is not a number from 0 to 65535`},
		{"port too big", "PLAINTEXT://h:65536", "", `port "65536" is not a number from 0 to 65535`},
		{"negative port", "PLAINTEXT://h:-1", "", `port "-1" is not a number from 0 to 65535`},
		{"path", "PLAINTEXT://h:9092/x", "", `port "9092/x" is not a number`},
		{"bad host", "PLAINTEXT://h/x:9092", "", `host "h/x" may hold only letters, digits, '-', '.' and '_'`},
		{"duplicate name", "PLAINTEXT://a:1,plaintext://b:2", "", `listeners: listener name PLAINTEXT appears twice`},
		{"duplicate port", "PLAINTEXT://a:9092,SSL://b:9092", "", `listeners: PLAINTEXT and SSL both use port 9092`},
		{"map without colon", "PLAINTEXT://h:1", "CLIENT", `listener security protocol map: "CLIENT": want NAME:PROTOCOL`},
		{"map unknown protocol", "PLAINTEXT://h:1", "CLIENT:TLS", `listener security protocol map: "CLIENT:TLS": unknown security protocol "TLS" (want one of PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL)`},
		{"map twice", "PLAINTEXT://h:1", "CLIENT:SSL,client:SASL_SSL", `listener security protocol map: CLIENT is mapped twice`},
		{"map empty name", "PLAINTEXT://h:1", ":SSL", `listener security protocol map: ":SSL": empty listener name`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseListeners(tc.spec, tc.pmap)
			if err == nil {
				t.Fatalf("parsed %+v, want an error containing %q", got, tc.want)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q\nwant one containing %q", err, tc.want)
			}
		})
	}
}

func TestProtocolTLSAndSASL(t *testing.T) {
	for _, tc := range []struct {
		p         Protocol
		tls, sasl bool
	}{{Plaintext, false, false}, {SSL, true, false}, {SASLPlaintext, false, true}, {SASLSSL, true, true}} {
		if tc.p.TLS() != tc.tls || tc.p.SASL() != tc.sasl {
			t.Errorf("%s: TLS %v SASL %v, want %v %v", tc.p, tc.p.TLS(), tc.p.SASL(), tc.tls, tc.sasl)
		}
	}
}

func TestParseAdvertised(t *testing.T) {
	ls, err := ParseListeners("CLIENT://0.0.0.0:9092,REPLICATION://10.0.0.5:9094,PLAINTEXT://:0", "CLIENT:SASL_SSL,REPLICATION:SSL")
	if err != nil {
		t.Fatal(err)
	}
	got, err := ParseAdvertised("plaintext://b1.example:19092, CLIENT://b1.example:9092", ls)
	if err != nil {
		t.Fatal(err)
	}
	want := []Listener{
		{"CLIENT", SASLSSL, "b1.example", 9092},
		{"REPLICATION", SSL, "10.0.0.5", 9094}, // no entry: its bound address
		{"PLAINTEXT", Plaintext, "b1.example", 19092},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v\nwant %+v", got, want)
	}

	// A listener on port 0 without an entry keeps port 0 for the caller to
	// fill in; two advertised entries may share a port.
	ls2, err := ParseListeners("PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:9093", "")
	if err != nil {
		t.Fatal(err)
	}
	got, err = ParseAdvertised("SSL://lb.example:9093", ls2)
	if err != nil {
		t.Fatal(err)
	}
	if want := []Listener{{"PLAINTEXT", Plaintext, "127.0.0.1", 0}, {"SSL", SSL, "lb.example", 9093}}; !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v\nwant %+v", got, want)
	}
	if _, err := ParseAdvertised("PLAINTEXT://a.example:9000,SSL://b.example:9000", ls2); err != nil {
		t.Fatalf("shared advertised port: %v", err)
	}
}

func TestParseAdvertisedErrors(t *testing.T) {
	ls, err := ParseListeners("PLAINTEXT://127.0.0.1:9092,SSL://0.0.0.0:9093,SASL_SSL://:9094,SASL_PLAINTEXT://[::]:9095", "")
	if err != nil {
		t.Fatal(err)
	}
	ok := "SSL://h:9093,SASL_SSL://h:9094,SASL_PLAINTEXT://h:9095"
	for _, tc := range []struct {
		name, spec, want string
	}{
		{"not a listener", ok + ",CLIENT://h:1", `advertised listeners: "CLIENT://h:1": CLIENT is not a listener (listeners: PLAINTEXT, SSL, SASL_SSL, SASL_PLAINTEXT)`},
		{"twice", ok + ",ssl://h2:9093", `advertised listeners: SSL is advertised twice`},
		{"advertises 0.0.0.0", "SSL://0.0.0.0:9093,SASL_SSL://h:9094,SASL_PLAINTEXT://h:9095", `advertised listeners: "SSL://0.0.0.0:9093": 0.0.0.0 is not an address clients can dial`},
		{"advertises ::", "SSL://[::]:9093,SASL_SSL://h:9094,SASL_PLAINTEXT://h:9095", `"SSL://[::]:9093": :: is not an address clients can dial`},
		{"advertises empty host", "SSL://:9093,SASL_SSL://h:9094,SASL_PLAINTEXT://h:9095", `"SSL://:9093": an empty host is not an address clients can dial`},
		{"advertises port 0", "SSL://h:0,SASL_SSL://h:9094,SASL_PLAINTEXT://h:9095", `"SSL://h:0": port 0 cannot be dialled`},
		{"inherits 0.0.0.0", "SASL_SSL://h:9094,SASL_PLAINTEXT://h:9095", `advertised listeners: listener SSL binds 0.0.0.0:9093 and 0.0.0.0 is not an address clients can dial; advertise one as SSL://host:port`},
		{"inherits empty host", "SSL://h:9093,SASL_PLAINTEXT://h:9095", `listener SASL_SSL binds :9094 and an empty host is not an address clients can dial`},
		{"inherits ::", "SSL://h:9093,SASL_SSL://h:9094", `listener SASL_PLAINTEXT binds [::]:9095 and :: is not an address clients can dial`},
		{"bad form", ok + ",SSL//h:1", `advertised listeners: "SSL//h:1": want NAME://host:port`},
		{"missing port", "SSL://h", `advertised listeners: "SSL://h": missing port`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseAdvertised(tc.spec, ls)
			if err == nil {
				t.Fatalf("parsed %+v, want an error containing %q", got, tc.want)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q\nwant one containing %q", err, tc.want)
			}
		})
	}
	if _, err := ParseAdvertised(ok, ls); err != nil {
		t.Fatalf("every unroutable listener advertised: %v", err)
	}
}

func TestLookupAndAddr(t *testing.T) {
	ls, err := ParseListeners("CLIENT://[::1]:9092,PLAINTEXT://:9093", "CLIENT:SSL")
	if err != nil {
		t.Fatal(err)
	}
	l, ok := Lookup(ls, "client")
	if !ok || l.Addr() != "[::1]:9092" || l.String() != "CLIENT://[::1]:9092" {
		t.Fatalf("Lookup client: %+v %v (%s, %s)", l, ok, l.Addr(), l)
	}
	if l, _ := Lookup(ls, "PLAINTEXT"); l.Addr() != ":9093" {
		t.Fatalf("all interfaces: Addr %q, want :9093", l.Addr())
	}
	if _, ok := Lookup(ls, "SSL"); ok {
		t.Fatal("found a listener that is not there")
	}
}

// FuzzParseListeners checks that no input panics, and that what parses
// prints (Listener.String) to a spec that parses again to the same
// listeners, which then obey the package invariants.
func FuzzParseListeners(f *testing.F) {
	for _, seed := range [][2]string{
		{"PLAINTEXT://127.0.0.1:9092,SASL_SSL://0.0.0.0:9093", ""},
		{"CLIENT://:9092,REPLICATION://[::1]:9094", "CLIENT:SASL_SSL,REPLICATION:SSL"},
		{"PLAINTEXT://[fe80::1%eth0]:0,SSL://h:0", ""},
		{"PLAINTEXT://::1:9092", ""},
		{"x://[::1", "x:ssl"},
		{" , plaintext://h:65535 ,", " "},
	} {
		f.Add(seed[0], seed[1])
	}
	f.Fuzz(func(t *testing.T, spec, pmap string) {
		ls, err := ParseListeners(spec, pmap)
		if err != nil {
			return
		}
		parts := make([]string, len(ls))
		ports := map[int]bool{}
		for i, l := range ls {
			parts[i] = l.String()
			if l.Name != strings.ToUpper(l.Name) || l.Name == "" {
				t.Fatalf("name %q is not upper case", l.Name)
			}
			if _, err := ParseProtocol(string(l.Protocol)); err != nil {
				t.Fatalf("protocol %q: %v", l.Protocol, err)
			}
			if l.Port < 0 || l.Port > 65535 || (l.Port != 0 && ports[l.Port]) {
				t.Fatalf("port %d out of range or repeated", l.Port)
			}
			ports[l.Port] = true
		}
		again, err := ParseListeners(strings.Join(parts, ","), pmap)
		if err != nil {
			t.Fatalf("%q parsed to %+v, whose form %q does not parse: %v", spec, ls, parts, err)
		}
		if !reflect.DeepEqual(ls, again) {
			t.Fatalf("round trip: %+v became %+v", ls, again)
		}
		// Advertising every listener by its own form either works or is
		// refused, never panics.
		_, _ = ParseAdvertised(strings.Join(parts, ","), ls)
	})
}
