package chaos

import (
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
)

func TestRegisterModel(t *testing.T) {
	w := func(client int, key, v string, call, ret int64) Op {
		return Op{Client: client, Key: key, Kind: Write, Value: v, Outcome: OK, Call: call, Return: ret}
	}
	unknown := func(client int, key, v string, call int64) Op {
		return Op{Client: client, Key: key, Kind: Write, Value: v, Outcome: Unknown, Call: call, Return: call + 1}
	}
	r := func(client int, key, v string, call, ret int64) Op {
		return Op{Client: client, Key: key, Kind: Read, Value: v, Outcome: OK, Call: call, Return: ret}
	}
	cases := []struct {
		name string
		ops  []Op
		want porcupine.CheckResult
	}{
		{"read after write", []Op{w(0, "a", "1", 0, 10), r(1, "a", "1", 20, 30)}, porcupine.Ok},
		{"stale read after an acknowledged write", []Op{w(0, "a", "1", 0, 10), w(0, "a", "2", 11, 20), r(1, "a", "1", 30, 40)}, porcupine.Illegal},
		{"read of nothing before the first write", []Op{r(1, "a", "", 0, 5), w(0, "a", "1", 10, 20)}, porcupine.Ok},
		{"read of nothing after it", []Op{w(0, "a", "1", 0, 10), r(1, "a", "", 20, 30)}, porcupine.Illegal},
		{"concurrent read may see either", []Op{w(0, "a", "1", 0, 10), w(0, "a", "2", 11, 40), r(1, "a", "1", 20, 30)}, porcupine.Ok},
		{"an unknown write may take effect late", []Op{unknown(0, "a", "1", 0), r(1, "a", "", 5, 6), r(1, "a", "1", 100, 110)}, porcupine.Ok},
		{"an unknown write may never take effect", []Op{w(0, "a", "1", 0, 10), unknown(0, "a", "2", 11), r(1, "a", "1", 100, 110)}, porcupine.Ok},
		{"but not un-happen", []Op{unknown(0, "a", "2", 0), r(1, "a", "2", 5, 6), r(1, "a", "", 100, 110)}, porcupine.Illegal},
		{"keys are independent", []Op{w(0, "a", "1", 0, 10), w(0, "b", "1", 0, 10), r(1, "b", "1", 20, 30), r(1, "a", "1", 20, 30)}, porcupine.Ok},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got, _ := Linearizable(tc.ops, 10*time.Second); got != tc.want {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
		})
	}
}
