package main

// quota.go owns the quota subcommands: setting and removing a tenant's
// quotas and scheduling attributes, listing them, and listing the keys.
// Keys and values are checked here with broker/quota's rules (a pure
// package that links no server code), so a typo is a command-line mistake
// (exit 2) before any call; the server checks again.

import (
	"context"
	"flag"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/sluice-mq/sluice/broker/quota"
)

// tenantQuotas is the API's TenantQuotas.
type tenantQuotas struct {
	Tenant        string             `json:"tenant"`
	Limits        map[string]float64 `json:"limits"`
	Weight        float64            `json:"weight"`
	PriorityClass string             `json:"priority_class"`
}

// listFlag collects a repeated flag; each use may also hold a comma list.
type listFlag []string

func (l *listFlag) String() string { return strings.Join(*l, ",") }
func (l *listFlag) Set(v string) error {
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			*l = append(*l, s)
		}
	}
	return nil
}

// fmtValue prints a quota value without an exponent.
func fmtValue(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }

// parseSets reads key=value arguments.
func parseSets(args []string) (map[string]float64, error) {
	set := map[string]float64{}
	for _, a := range args {
		k, text, ok := strings.Cut(a, "=")
		if !ok {
			return nil, usagef("%q is not key=value (sluicectl quota keys lists the keys)", a)
		}
		if _, dup := set[k]; dup {
			return nil, usagef("key %s given twice", k)
		}
		v, err := quota.Parse(k, text)
		if err != nil {
			return nil, usagef("%v", err)
		}
		set[k] = v
	}
	return set, nil
}

func quotaSetFlags(fs *flag.FlagSet) func(context.Context, *env, []string) error {
	tenantName := fs.String("tenant", "", "the tenant (required)")
	var remove listFlag
	fs.Var(&remove, "remove", "a key to remove (unlimited again); repeat or separate with commas")
	weight := fs.Float64("weight", 0, "the tenant's share in fair scheduling (> 0; default 1)")
	class := fs.String("priority-class", "", "standard or low (the disk-watermark ladder lowers low tenants' bursts first)")
	return func(ctx context.Context, e *env, args []string) error {
		if *tenantName == "" {
			return usagef("--tenant is required")
		}
		set, err := parseSets(args)
		if err != nil {
			return err
		}
		for _, k := range remove {
			if _, ok := quota.Lookup(k); !ok {
				return usagef("%v", quota.Check(k, 1))
			}
			if _, ok := set[k]; ok {
				return usagef("key %s is both set and removed", k)
			}
		}
		sched := *weight != 0 || *class != ""
		if len(set) == 0 && len(remove) == 0 && !sched {
			return usagef("nothing to do: give key=value arguments, --remove, --weight or --priority-class")
		}
		var q tenantQuotas
		path := "/v1/tenants/" + esc(*tenantName)
		if len(set) > 0 || len(remove) > 0 {
			body := map[string]any{"set": set, "remove": []string(remove)}
			if err := e.call(ctx, "PUT", path+"/quotas", nil, body, &q); err != nil {
				return err
			}
		}
		if sched {
			body := map[string]any{}
			if *weight != 0 {
				body["weight"] = *weight
			}
			if *class != "" {
				body["priority_class"] = *class
			}
			q = tenantQuotas{}
			if err := e.call(ctx, "PUT", path+"/scheduling", nil, body, &q); err != nil {
				return err
			}
		}
		if e.json {
			return e.writeJSON(q)
		}
		return e.printQuotas([]tenantQuotas{q})
	}
}

func quotaLsFlags(fs *flag.FlagSet) func(context.Context, *env, []string) error {
	tenantName := fs.String("tenant", "", "one tenant's quotas (default: every tenant with any set; super users)")
	return func(ctx context.Context, e *env, args []string) error {
		if err := positional(args); err != nil {
			return err
		}
		var out struct {
			Tenants []tenantQuotas `json:"tenants"`
		}
		if *tenantName != "" {
			var q tenantQuotas
			if err := e.call(ctx, "GET", "/v1/tenants/"+esc(*tenantName)+"/quotas", nil, nil, &q); err != nil {
				return err
			}
			out.Tenants = []tenantQuotas{q}
		} else if err := e.call(ctx, "GET", "/v1/quotas", url.Values{}, nil, &out); err != nil {
			return err
		}
		if e.json {
			return e.writeJSON(out)
		}
		return e.printQuotas(out.Tenants)
	}
}

// printQuotas prints one row per tenant and key ("-" for a tenant with
// none: unlimited).
func (e *env) printQuotas(qs []tenantQuotas) error {
	tw := e.table()
	fmt.Fprintln(tw, "TENANT\tWEIGHT\tCLASS\tKEY\tVALUE\tUNIT")
	for _, q := range qs {
		keys := slices.Sorted(maps.Keys(q.Limits))
		if len(keys) == 0 {
			fmt.Fprintf(tw, "%s\t%s\t%s\t-\t-\t-\n", q.Tenant, fmtValue(q.Weight), q.PriorityClass)
		}
		for _, k := range keys {
			unit := "-"
			if key, ok := quota.Lookup(k); ok {
				unit = key.Unit
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", q.Tenant, fmtValue(q.Weight), q.PriorityClass, k, fmtValue(q.Limits[k]), unit)
		}
	}
	return tw.Flush()
}

// quotaKey is one key as `quota keys --json` prints it.
type quotaKey struct {
	Name  string `json:"name"`
	Kind  string `json:"kind"`
	Unit  string `json:"unit"`
	Kafka bool   `json:"kafka"`
	Help  string `json:"help"`
}

func quotaKeysFlags(*flag.FlagSet) func(context.Context, *env, []string) error {
	return func(_ context.Context, e *env, args []string) error {
		if err := positional(args); err != nil {
			return err
		}
		var keys []quotaKey
		for _, k := range quota.Keys() {
			keys = append(keys, quotaKey{Name: k.Name, Kind: k.Kind.String(), Unit: k.Unit, Kafka: k.Kafka, Help: k.Help})
		}
		if e.json {
			return e.writeJSON(map[string]any{"keys": keys})
		}
		tw := e.table()
		fmt.Fprintln(tw, "KEY\tKIND\tUNIT\tKAFKA\tHELP")
		for _, k := range keys {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", k.Name, k.Kind, k.Unit, map[bool]string{true: "yes", false: "-"}[k.Kafka], k.Help)
		}
		return tw.Flush()
	}
}
