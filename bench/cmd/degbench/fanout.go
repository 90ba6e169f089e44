package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// changeStats is one change: milliseconds from the change (just before
// the PUT, or the PUBLISH, is sent) to the first, the median and the last
// subscriber holding it.
type changeStats struct {
	FirstMs, MedianMs, LastMs float64
}

// fanoutResult is what `degbench fanout` writes.
type fanoutResult struct {
	Subscribers  int
	Changes      int
	Persisted    bool // the daemon had a data_dir: each change is saved (fsync) before it returns
	PayloadBytes int  // the state document carried by each event and message
	Degraded     []changeStats
	Redis        []changeStats
	// Floor is the bare floor (fanout_floor.go): one process writing the
	// same event to as many sockets in a loop, no daemon.
	Floor []changeStats
	PutMs []float64 // how long each override PUT took to answer
	// Daemon memory before the subscribers connected and after the
	// changes, with every subscriber still connected.
	DaemonBefore, DaemonAfter memStats
	RedisRSSBefore            float64
	RedisRSSAfter             float64
	RedisVersion              string
}

func fanoutCmd(args []string) error {
	fs := flag.NewFlagSet("fanout", flag.ExitOnError)
	binary := fs.String("binary", "./degraded", "degraded binary")
	redisBin := fs.String("redis-server", "redis-server", "redis-server binary")
	n := fs.Int("subscribers", 10000, "subscribers to each system")
	changes := fs.Int("changes", 40, "measured changes per system (after 2 warm-up changes)")
	memory := fs.Bool("memory-state", false, `data_dir: "" (state in memory, nothing saved per change)`)
	out := fs.String("out", "fanout.json", "result file")
	_ = fs.Parse(args)

	res := fanoutResult{Subscribers: *n, Changes: *changes, Persisted: !*memory}
	cfg := fmt.Sprintf("signals: {cpu: {source: off}, memory: {source: off}}\nsse: {max_subscribers: %d}\nlog: {level: warn}\n", *n+1000)
	if *memory {
		cfg += "data_dir: \"\"\n"
	}
	d, err := startDaemon(*binary, cfg)
	if err != nil {
		return err
	}
	defer d.stop()
	rs, err := startRedis(*redisBin, *n+1000)
	if err != nil {
		return err
	}
	defer rs.stop()

	ctx := context.Background()
	hc := &http.Client{Timeout: 30 * time.Second}
	payload, err := do(hc, mustRequest(http.MethodGet, d.url+"/v1/level"))
	if err != nil {
		return err
	}
	payload = bytes.TrimSpace(payload)
	res.PayloadBytes = len(payload)
	var st struct{ Sequence uint64 }
	if err := json.Unmarshal(payload, &st); err != nil {
		return err
	}
	seq := st.Sequence
	pub := redis.NewClient(&redis.Options{Addr: rs.addr})
	defer pub.Close()
	info, _ := pub.Info(ctx, "server").Result()
	res.RedisVersion = infoField(info, "redis_version")

	time.Sleep(500 * time.Millisecond)
	if res.DaemonBefore, err = d.settledMemStats(5); err != nil {
		return err
	}
	if res.RedisRSSBefore, err = procRSS(rs.pid()); err != nil {
		return err
	}
	start := time.Now()
	sseSubs, err := startSubscribers("sse", d.url+"/v1/level/stream", *n)
	if err != nil {
		return err
	}
	defer sseSubs.stop()
	redisSubs, err := startSubscribers("redis", rs.addr, *n)
	if err != nil {
		return err
	}
	defer redisSubs.stop()
	floor, err := startFloor()
	if err != nil {
		return err
	}
	defer floor.stop()
	floorSubs, err := startSubscribers("sse", floor.url+"/v1/level/stream", *n)
	if err != nil {
		return err
	}
	defer floorSubs.stop()
	fmt.Fprintf(os.Stderr, "fanout: %d SSE, %d Redis and %d floor subscribers connected in %.1fs\n", *n, *n, *n, time.Since(start).Seconds())
	time.Sleep(time.Second)

	levels := []string{"Major", "Minor"}
	sseChange := func(i int) (changeStats, error) {
		seq++
		if err := sseSubs.expect(seq); err != nil {
			return changeStats{}, err
		}
		body := fmt.Sprintf(`{"level":%q,"mode":"pin","ttl":"10m","reason":"bench fan-out %d"}`, levels[i%2], i)
		t0 := now()
		b, err := d.put(hc, "/v1/override", body)
		if err != nil {
			return changeStats{}, err
		}
		if i >= 2 {
			res.PutMs = append(res.PutMs, float64(now()-t0)/1e6)
		}
		if err := json.Unmarshal(b, &st); err != nil {
			return changeStats{}, err
		}
		if st.Sequence != seq {
			return changeStats{}, fmt.Errorf("override made sequence %d, expected %d", st.Sequence, seq)
		}
		return sseSubs.result(seq, t0)
	}
	redisChange := func(i int) (changeStats, error) {
		key := uint64(i + 1)
		if err := redisSubs.expect(key); err != nil {
			return changeStats{}, err
		}
		msg := append(strconv.AppendUint(nil, key, 10), '\n')
		msg = append(msg, payload...)
		t0 := now()
		got, err := pub.Publish(ctx, "degraded-level", msg).Result()
		if err != nil {
			return changeStats{}, err
		}
		if got != int64(*n) {
			return changeStats{}, fmt.Errorf("PUBLISH reached %d subscribers, expected %d", got, *n)
		}
		return redisSubs.result(key, t0)
	}
	floorChange := func(i int) (changeStats, error) {
		key := uint64(i + 1)
		if err := floorSubs.expect(key); err != nil {
			return changeStats{}, err
		}
		t0 := now()
		got, err := floor.publish(hc, key, payload)
		if err != nil {
			return changeStats{}, err
		}
		if got != *n {
			return changeStats{}, fmt.Errorf("the floor wrote to %d subscribers, expected %d", got, *n)
		}
		return floorSubs.result(key, t0)
	}
	// Two warm-up changes each, then the measured ones, rotating which
	// system goes first so that none always follows another.
	systems := []func(int) (changeStats, error){sseChange, redisChange, floorChange}
	for i := range *changes + 2 {
		var got [3]changeStats
		for k := range systems {
			j := (i + k) % len(systems)
			if k > 0 {
				time.Sleep(100 * time.Millisecond)
			}
			c, err := systems[j](i)
			if err != nil {
				return err
			}
			got[j] = c
		}
		if i >= 2 {
			res.Degraded = append(res.Degraded, got[0])
			res.Redis = append(res.Redis, got[1])
			res.Floor = append(res.Floor, got[2])
		}
		time.Sleep(100 * time.Millisecond)
	}
	if res.DaemonAfter, err = d.settledMemStats(5); err != nil {
		return err
	}
	if res.RedisRSSAfter, err = procRSS(rs.pid()); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "fanout: to the last subscriber p50/p99/max: degraded %.1f/%.1f/%.1f ms, redis %.1f/%.1f/%.1f ms, floor %.1f/%.1f/%.1f ms; PUT p50 %.1f ms; daemon RSS %.1f -> %.1f MiB\n",
		quantile(lastMs(res.Degraded), .5), quantile(lastMs(res.Degraded), .99), quantile(lastMs(res.Degraded), 1),
		quantile(lastMs(res.Redis), .5), quantile(lastMs(res.Redis), .99), quantile(lastMs(res.Redis), 1),
		quantile(lastMs(res.Floor), .5), quantile(lastMs(res.Floor), .99), quantile(lastMs(res.Floor), 1),
		quantile(res.PutMs, .5), res.DaemonBefore.RSS/(1<<20), res.DaemonAfter.RSS/(1<<20))
	return writeJSON(*out, res)
}

func lastMs(cs []changeStats) []float64 {
	v := make([]float64, len(cs))
	for i, c := range cs {
		v[i] = c.LastMs
	}
	return v
}

func mustRequest(method, url string) *http.Request {
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		panic(err)
	}
	return req
}

func infoField(info, name string) string {
	for _, line := range bytes.Split([]byte(info), []byte("\n")) {
		if v, ok := bytes.CutPrefix(bytes.TrimSpace(line), []byte(name+":")); ok {
			return string(v)
		}
	}
	return ""
}

func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return errors.Join(os.WriteFile(path, append(b, '\n'), 0o644))
}
