package node

// diskladder.go owns the disk-watermark ladder: three watermarks on the
// share of the data dir's file system in use, each a step of a pure state
// machine with hysteresis, read by creation and produce through DiskLevel
// (and by the quota enforcement through Ladder):
//
//	level 0  below the first watermark        nothing refused
//	level 1  at or above the first           new topics and partitions refused
//	                                         (POLICY_VIOLATION "disk above the
//	                                         first watermark", HTTP 507)
//	level 2  at or above the second          low-priority tenants lose their
//	                                         burst allowance (BurstAllowed)
//	level 3  at or above the third           publishes of tenants over quota
//	                                         refused, retriable (KAFKA_STORAGE_ERROR)
//	reserve  free < --disk-min-free-bytes    every publish refused (diskguard.go),
//	                                         so the broker keeps room to
//	                                         recover, upload and delete
//
// A level is left only once the use falls hysteresisPoints below its
// watermark, so a disk hovering at a watermark does not flap. Each level
// entered or left is logged once, and the level is exported as
// sluice_disk_watermark_level (alert on > 0).
//
// Invariant: the level changes by the readings alone (step is a pure
// function of the previous level and one reading); it rises through every
// level at or below the reading and falls through every level whose
// watermark minus the hysteresis is above it.

import (
	"fmt"
	"strconv"
	"strings"
)

// hysteresisPoints is how far (in percentage points of the file system)
// the use must fall below a watermark to leave its level.
const hysteresisPoints = 2.0

// Watermarks are the three watermarks in percent of the data dir's file
// system in use, increasing; all zero turns the ladder off.
type Watermarks [3]float64

// Off reports whether the ladder is turned off.
func (w Watermarks) Off() bool { return w == Watermarks{} }

// ParseWatermarks reads "80,90,95"; "" is off.
func ParseWatermarks(s string) (Watermarks, error) {
	var w Watermarks
	if strings.TrimSpace(s) == "" {
		return w, nil
	}
	parts := strings.Split(s, ",")
	if len(parts) != len(w) {
		return w, fmt.Errorf("disk watermarks %q: want three percentages, e.g. 80,90,95", s)
	}
	for i, p := range parts {
		v, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(p), "%"), 64)
		if err != nil {
			return w, fmt.Errorf("disk watermarks %q: %q is not a number", s, p)
		}
		w[i] = v
	}
	return w, w.Validate()
}

// Validate reports watermarks that cannot work.
func (w Watermarks) Validate() error {
	if w.Off() {
		return nil
	}
	for i, v := range w {
		if v <= hysteresisPoints || v > 100 {
			return fmt.Errorf("disk watermark %d is %g%%; each must be above %g%% and at most 100%%", i+1, v, hysteresisPoints)
		}
		if i > 0 && v <= w[i-1] {
			return fmt.Errorf("disk watermarks %v must increase", w)
		}
	}
	return nil
}

func (w Watermarks) String() string {
	if w.Off() {
		return ""
	}
	return fmt.Sprintf("%g,%g,%g", w[0], w[1], w[2])
}

// diskLadder is the ladder's state machine.
type diskLadder struct {
	marks Watermarks
	level int
}

// step takes one reading of the share in use (percent) and returns the
// levels before and after it.
func (l *diskLadder) step(usedPct float64) (from, to int) {
	from = l.level
	if l.marks.Off() {
		l.level = 0
		return from, 0
	}
	for l.level < len(l.marks) && usedPct >= l.marks[l.level] {
		l.level++
	}
	for l.level > 0 && usedPct < l.marks[l.level-1]-hysteresisPoints {
		l.level--
	}
	return from, l.level
}

// levelMeaning is what each level does, for the log.
var levelMeaning = [...]string{
	1: "new topics and partitions refused",
	2: "burst allowances of low-priority tenants fall to their base rate",
	3: "publishes of tenants over quota refused",
}

// BurstAllowed reports whether a tenant may use its burst allowance above
// its base rate at disk level level: from level 2 on, a tenant of a low
// priority class may not.
func BurstAllowed(level int, lowPriority bool) bool {
	return level < 2 || !lowPriority
}

// LevelReader is what quota enforcement reads of the ladder.
type LevelReader interface {
	Level() int
}

type ladderView struct{ b *Node }

func (v ladderView) Level() int { return v.b.DiskLevel() }

// Ladder is the ladder as quota enforcement reads it.
func (b *Node) Ladder() LevelReader { return ladderView{b} }

// DiskLevel is the ladder's level now: 0 (nothing refused) to 3.
func (b *Node) DiskLevel() int { return int(b.level.Load()) }

// SetOverQuota sets how the third level tells a tenant over its quota (the
// rate admitter knows); nil: none is, and only the storage quota and the
// reserve refuse publishes.
func (b *Node) SetOverQuota(fn func(tenant string) bool) { b.overQuota.Store(&fn) }

// stepLadder feeds one reading to the ladder and logs each level entered
// or left. It runs on the disk guard loop only.
func (b *Node) stepLadder(usedPct float64) {
	from, to := b.ladder.step(usedPct)
	for l := from + 1; l <= to; l++ {
		b.Logger.Warn().Int("disk_level", l).Float64("used_pct", usedPct).Float64("watermark_pct", b.ladder.marks[l-1]).
			Msgf("disk above watermark %d: %s", l, levelMeaning[l])
	}
	for l := from; l > to; l-- {
		b.Logger.Info().Int("disk_level", l).Float64("used_pct", usedPct).Float64("watermark_pct", b.ladder.marks[l-1]).
			Msgf("disk below watermark %d again: %s no more", l, levelMeaning[l])
	}
	b.level.Store(int32(to))
}
