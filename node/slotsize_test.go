package node

import (
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/synod-dev/synod/config"
	"github.com/synod-dev/synod/shard"
)

// A live split by size cuts where the keys divide (split47): s0 owns
// slots 0-1023 on n1-n3, s1 the rest on n4-n6, s2 is unplaced; split_keys
// is 300 and no load is near split_ops. 400 keys are written, all in
// slots 0-63. The placement leader reads s0's size per slot (it is near
// the threshold, slotsize.go) and cuts s0 by its keys: the slots moved to
// s2 start inside 1-63, and each side keeps between a quarter and three
// quarters of the keys. Before the per-slot sizes the leader cut a split
// by size at the median slot (512-1023 moved: none of the keys).
func TestPlacementSplitCutsBySize(t *testing.T) {
	c := startSplitCluster(t, &config.Placement{SplitKeys: 300, SplitOps: 1e6, NoMerge: true, Cooldown: "1s", Rate: 5000, BalanceOps: -1})
	ctx, plain := c.ctx, c.plain
	var keys []string
	for i := 0; len(keys) < 400; i++ {
		if k := fmt.Sprintf("k%d", i); shard.KeySlot(k) < 64 {
			keys = append(keys, k)
		}
	}
	acked := map[string]string{}
	for len(acked) < len(keys) && ctx.Err() == nil {
		pipe := plain.Pipeline()
		cmds := map[string]*redis.StatusCmd{}
		for _, k := range keys {
			if _, ok := acked[k]; !ok {
				cmds[k] = pipe.Set(ctx, k, "v-"+k, 0)
			}
		}
		pipe.Exec(ctx) // each command's own error is checked
		for k, c := range cmds {
			if c.Err() == nil {
				acked[k] = "v-" + k
			}
		}
	}
	c.waitSplit()
	_, v, log := c.split(t)
	cut, below := cutInside(t, v, keys, 0, 63)
	if !regexp.MustCompile(`keys \d+ over 300`).MatchString(log) || !strings.Contains(log, "a cut by size (") {
		t.Fatalf("the decision does not say it split by keys and cut by size:\n%s", log)
	}
	t.Logf("cut at slot %d: %d keys stay in s0, %d moved to s2", cut, below, len(keys)-below)
	readBack(ctx, t, plain, acked, func() {})
}

// The per-slot answer's parse, and the weights: each group's slots it
// owns now, nil without any per-slot answer.
func TestSlotSizeWeights(t *testing.T) {
	got := parseSlotSizes("3:2:10 bad 5:x:1 7:1:4 99999:1:1 9:1")
	if len(got) != 2 || got[0] != (ss(3, 2, 10)) || got[1] != (ss(7, 1, 4)) {
		t.Fatalf("parsed %v", got)
	}
	var owner [shard.Slots]int16
	for i := range owner {
		owner[i] = int16(i % 2)
	}
	if k, b := slotSizeWeights([]groupSize{{ok: true}, {ok: true}}, &owner); k != nil || b != nil {
		t.Fatal("weights without a per-slot answer")
	}
	// Group 0 answered slots 3 and 4 (3 is group 1's: left out), group 1
	// slot 7.
	k, b := slotSizeWeights([]groupSize{{ok: true, slots: []slotSize{ss(4, 5, 50), ss(3, 2, 10)}}, {ok: true, slots: []slotSize{ss(7, 1, 4)}}}, &owner)
	if k[3] != 0 || b[3] != 0 || k[4] != 5 || b[4] != 50 || k[7] != 1 || b[7] != 4 {
		t.Fatalf("weights %v %v", k[:8], b[:8])
	}
	// Slot 3 moved to group 0; group 1's answer is not ok (a failed read).
	owner[3] = 0
	k, b = slotSizeWeights([]groupSize{{ok: true, slots: []slotSize{ss(4, 5, 50), ss(3, 2, 10)}}, {ok: false, slots: []slotSize{ss(7, 1, 4)}}}, &owner)
	if k[3] != 2 || b[3] != 10 || k[4] != 5 || b[4] != 50 || k[7] != 0 {
		t.Fatalf("weights %v %v", k[:8], b[:8])
	}
}

// ss is a slotSize (shard.SlotSize) literal.
func ss(slot int, keys, bytes int64) slotSize { return slotSize{Slot: slot, Keys: keys, Bytes: bytes} }
