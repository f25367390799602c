package client_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/raftmq/raftmq/client"
	"github.com/raftmq/raftmq/tlsconf"
	"github.com/raftmq/raftmq/transport/transporttest"
)

// startExampleServer runs a single-node server over a real store in a temp
// dir (no Raft) and returns its address and a cleanup function.
func startExampleServer() (string, func()) {
	dir, err := os.MkdirTemp("", "raftmq-example-")
	if err != nil {
		log.Fatal(err)
	}
	s, err := transporttest.Start(dir)
	if err != nil {
		log.Fatal(err)
	}
	return s.Addr, func() { _ = s.Close(); _ = os.RemoveAll(dir) }
}

func Example() {
	addr, stop := startExampleServer()
	defer stop()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	c, err := client.New(ctx, []string{addr}, client.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	if err := c.CreateTopic(ctx, "orders", 4); err != nil {
		log.Fatal(err)
	}
	res, err := c.Send(ctx, client.NewMessage("orders", []byte("order #1")).WithQueue(2).WithKeys("order-1").WithTag("new"))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("stored at queue", res[0].QueueID, "offset", res[0].QueueOffset)

	r, err := c.Pull(ctx, client.PullRequest{Topic: "orders", QueueID: 2, Offset: 0})
	if err != nil {
		log.Fatal(err)
	}
	m := r.Messages[0]
	fmt.Println(r.Status == client.StatusFound, string(m.Body), m.Keys, m.Tags, m.MsgID == res[0].MsgID)
	// Output:
	// stored at queue 2 offset 0
	// true order #1 [order-1] new true
}

func ExampleProducer() {
	addr, stop := startExampleServer()
	defer stop()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := client.New(ctx, []string{addr}, client.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	if err := c.CreateTopic(ctx, "events", 1); err != nil {
		log.Fatal(err)
	}

	p := client.NewProducer(c, client.ProducerOptions{MaxBatch: 32, Linger: time.Millisecond})
	acked := make(chan int64, 100)
	for i := 0; i < 100; i++ {
		p.SendAsync(client.NewMessage("events", []byte(fmt.Sprint(i))).WithQueue(0), func(r client.SendResult, err error) {
			if err != nil {
				log.Print(err)
				return
			}
			acked <- r.QueueOffset
		})
	}
	if err := p.Flush(ctx); err != nil {
		log.Fatal(err)
	}
	_ = p.Close()
	fmt.Println("acknowledged:", len(acked))
	lo, hi, err := c.MinMaxOffset(ctx, "events", 0)
	fmt.Println("queue 0 offsets:", lo, hi, err)
	// Output:
	// acknowledged: 100
	// queue 0 offsets: 0 100 <nil>
}

func ExampleClient_CommitOffset() {
	addr, stop := startExampleServer()
	defer stop()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := client.New(ctx, []string{addr}, client.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	if err := c.CreateTopic(ctx, "jobs", 1); err != nil {
		log.Fatal(err)
	}
	if err := c.CommitOffset(ctx, "workers", "jobs", 0, 0); err != nil {
		log.Fatal(err)
	}
	off, found, err := c.QueryOffset(ctx, "workers", "jobs", 0)
	fmt.Println(off, found, err)
	_, _, err = c.QueryOffset(ctx, "workers", "no such topic", 0)
	fmt.Println(err != nil)
	// Output:
	// 0 true <nil>
	// true
}

// A client of a cluster that serves TLS and authenticates tokens: the CA
// file and the client certificate are what `raftmq certs` writes, the
// token what `raftmq auth token` prints.
func ExampleOptions_tls() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cfg, err := tlsconf.ClientConfig("certs/ca.pem", "certs/orders-service.pem", "certs/orders-service-key.pem")
	if err != nil {
		log.Fatal(err)
	}
	c, err := client.New(ctx, []string{"node1.example:9001", "node2.example:9001"}, client.Options{
		TLS:   cfg,
		Token: os.Getenv("RAFTMQ_TOKEN"),
	})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	topics, err := c.ListTopics(ctx)
	fmt.Println(len(topics), err)
}
