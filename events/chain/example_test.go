package chain_test

import (
	"fmt"

	"github.com/jetplane/jetplane/events/chain"
)

// The first two links of a chain, for anyone reimplementing it (the same
// values come from a few lines of Python's hashlib and struct).
func ExampleNext() {
	h1 := chain.Next(chain.Head{}, chain.Event{
		Seq: 1, Time: 1_700_000_000_000_000_000,
		Subject: []byte("jp.ev.3.ConfigMap.default.a"),
		Header:  []byte("NATS/1.0\r\nNats-Msg-Id: e1\r\n\r\n"),
		Data:    []byte("payload"),
	})
	h2 := chain.Next(h1, chain.Event{Seq: 2, Time: 1_700_000_000_000_000_001, Subject: []byte("jp.ev.3.ConfigMap.default.a"), Data: []byte("x")})
	fmt.Println(h1)
	fmt.Println(h2)
	// Output:
	// 06cd9c4670165a0f67b4534dc06ef46fb9cbd03c2523f5ce06ff94afda7194e6
	// 8c2c0a1a6420a663fb1f039994effe53b4de3efc24df80cb2f5b9c8626b7203c
}
