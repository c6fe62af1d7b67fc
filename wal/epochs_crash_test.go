package wal

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/wal/vfs"
)

// epochCrashScenario appends batches as a leader (Append, AppendGroup) and
// as a follower (AppendStamped) with rising epochs, fences, syncs,
// truncates, moves the start and crashes (with and without torn tails),
// checking after every crash that the recovered log is a prefix of what was
// appended, that the chain matches it (checkEpochChain), that recovery made
// the chain durable, and that the fence survived.
func epochCrashScenario(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 0xe9))
	clk := newClock()
	cfg := Config{
		SegmentBytes:       int64(200 + rng.IntN(1500)),
		IndexIntervalBytes: 1 + rng.IntN(400),
		SegmentAge:         time.Hour,
		Now:                clk.Now,
	}
	fs := vfs.NewMem()
	l := mustOpen(t, fs, cfg)
	var m crashModel
	epoch := Epoch(rng.IntN(3))
	newBatch := func() []byte {
		return mkBatch(1+rng.IntN(6), rng.IntN(200), clk.Now().UnixMilli(), byte(rng.Uint32()))
	}
	for step := range 150 + rng.IntN(150) {
		switch p := rng.IntN(100); {
		case p < 40: // leading
			if rng.IntN(5) == 0 {
				epoch += Epoch(1 + rng.IntN(3))
			}
			if rng.IntN(3) == 0 {
				group := [][]byte{newBatch(), newBatch()}
				for i, res := range l.AppendGroup(group, epoch) {
					if res.Err != nil {
						t.Fatalf("step %d: group append at epoch %d: %v", step, epoch, res.Err)
					}
					m.batches = append(m.batches, group[i])
				}
				break
			}
			b := newBatch()
			if _, _, err := l.Append(b, epoch); err != nil {
				t.Fatalf("step %d: append at epoch %d: %v", step, epoch, err)
			}
			m.batches = append(m.batches, b)
		case p < 55: // following: the leader's batch at our end, of an epoch at or above ours
			if rng.IntN(4) == 0 {
				epoch += Epoch(1 + rng.IntN(2))
			}
			b := newBatch()
			stampBatch(b, l.EndOffset(), epoch)
			if _, _, err := l.AppendStamped(b); err != nil {
				t.Fatalf("step %d: stamped append at epoch %d: %v", step, epoch, err)
			}
			m.batches = append(m.batches, b)
		case p < 68:
			if _, err := l.Sync(); err != nil {
				t.Fatalf("step %d: sync: %v", step, err)
			}
		case p < 76 && len(m.batches) > 0: // a follower cuts its divergent tail
			h, _ := ParseBatchHeader(m.batches[rng.IntN(len(m.batches))])
			if h.BaseOffset < l.StartOffset() {
				break
			}
			if err := l.Truncate(h.BaseOffset); err != nil {
				t.Fatalf("step %d: truncate to %d: %v", step, h.BaseOffset, err)
			}
			m.cut(h.BaseOffset)
			// The new leader's epoch may be any at or above the log's last.
			epoch = max(l.LastEpoch(), l.FencedEpoch(), 0) + Epoch(rng.IntN(2))
		case p < 80:
			to := l.StartOffset() + Offset(rng.Int64N(int64(l.EndOffset()-l.StartOffset())+1))
			if _, err := l.AdvanceStart(to); err != nil {
				t.Fatalf("step %d: advance start to %d: %v", step, to, err)
			}
			if _, err := l.Maintain(); err != nil {
				t.Fatalf("step %d: maintain: %v", step, err)
			}
			m.dropBelow(l.StartOffset())
		case p < 83:
			epoch++
			if err := l.SetFencedEpoch(epoch); err != nil {
				t.Fatalf("step %d: fence at %d: %v", step, epoch, err)
			}
		case p < 93:
			checkEpochChain(t, l)
		default:
			fenced := l.FencedEpoch()
			l = crashAndCheck(t, rng, fs, l, &m, cfg)
			fs = l.fs.(*vfs.Mem)
			checkEpochChain(t, l)
			if got := l.FencedEpoch(); got != fenced {
				t.Fatalf("step %d: fenced epoch %d after a crash, was %d", step, got, fenced)
			}
			// What recovery decided is durable: a crash now changes nothing.
			again := mustOpen(t, fs.CrashClone(), cfg)
			if a, b := again.Epochs(), l.Epochs(); !reflect.DeepEqual(a, b) {
				t.Fatalf("step %d: chain %v after a second crash, %v after the first", step, a, b)
			}
			again.Close()
		}
	}
	checkEpochChain(t, l)
}

func TestEpochCrashRecovery(t *testing.T) {
	seeds := 150
	if testing.Short() {
		seeds = 30
	}
	for seed := range uint64(seeds) {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) {
			defer func() {
				if t.Failed() {
					t.Logf("reproduce with: go test ./wal -run 'TestEpochCrashRecovery/seed=%d$'", seed)
				}
			}()
			epochCrashScenario(t, seed)
		})
	}
}
