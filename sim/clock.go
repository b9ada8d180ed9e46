package sim

import "time"

// Clock skew (issue 17 item 2: expiry "tested under clock skew in the
// simulator"). Without Config.ClockSkew every node stamps the virtual time
// on the requests that reach it (service.Env.Time), as before. With it,
// node i's clock reads the virtual time plus a wall-clock epoch plus a
// fixed offset in [-ClockSkew, +ClockSkew], a pure function of the seed and
// i (splitmix64), so a replay gives every node the same clock again and no
// other random stream moves. The epoch keeps times positive under negative
// offsets (a zero or negative Env time means "no time" to KV's expiry).
// Node clocks run at the virtual rate: skew, not drift.

// clockEpoch is added to the virtual time when clocks are skewed.
var clockEpoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano()

// nodeTime is node idx's clock at the current virtual time.
func (s *simulator) nodeTime(idx int) int64 {
	if s.cfg.ClockSkew <= 0 {
		return int64(s.now)
	}
	return clockEpoch + int64(s.now) + ClockOffset(s.cfg.Seed, idx, s.cfg.ClockSkew)
}

// ClockOffset is node idx's clock offset in a run with the given seed and
// skew bound: uniform in [-skew, +skew].
func ClockOffset(seed int64, idx int, skew time.Duration) int64 {
	if skew <= 0 {
		return 0
	}
	z := uint64(seed)*0x9e3779b97f4a7c15 + uint64(idx+1)*0xbf58476d1ce4e5b9
	z ^= z >> 30
	z *= 0xbf58476d1ce4e5b9
	z ^= z >> 27
	z *= 0x94d049bb133111eb
	z ^= z >> 31
	return int64(z%uint64(2*skew+1)) - int64(skew)
}
