package main

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/redis/rueidis"
)

func main() {
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{"127.0.0.1:7391"}, DisableCache: true})
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	s := rueidis.NewLuaScript(`return redis.call("SET", KEYS[1], ARGV[1], "NX", "PX", 10000)`)
	var d []time.Duration
	for i := 0; i < 20; i++ {
		time.Sleep(200 * time.Millisecond)
		t0 := time.Now()
		s.Exec(ctx, c, []string{fmt.Sprint("k", i)}, []string{"v"})
		d = append(d, time.Since(t0))
	}
	sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
	fmt.Println(d)
}
