// Command webhook-receiver is an endpoint for payreq's webhooks: it checks
// each delivery with payreq.VerifyWebhook (the Standard Webhooks reference
// library underneath), skips events it has seen already (deliveries come
// at least once; the webhook-id is the event id) and prints each event's
// type and id.
//
//	PAYREQ_WEBHOOK_SECRET=whsec_… go run ./examples/webhook-receiver -addr 127.0.0.1:9000
//
// then register http://127.0.0.1:9000/payreq (make run allows plain http to
// this machine) with POST /webhook-endpoints.
package main

import (
	"flag"
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
	"sync"

	payreq "github.com/payreq/payreq/client"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:9000", "address to listen on")
	flag.Parse()
	secret := os.Getenv("PAYREQ_WEBHOOK_SECRET")
	if secret == "" {
		log.Fatal("set PAYREQ_WEBHOOK_SECRET to the secret payreq answered when the endpoint was made")
	}
	http.Handle("/payreq", receiver(secret, os.Stdout))
	log.Printf("listening on http://%s/payreq", *addr)
	log.Fatal(http.ListenAndServe(*addr, nil))
}

// receiver verifies, deduplicates and prints deliveries. A real one would
// remember seen ids durably and do its work after answering.
func receiver(secret string, out io.Writer) http.Handler {
	var mu sync.Mutex
	seen := map[string]bool{}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		if err != nil {
			http.Error(w, "unreadable body", http.StatusBadRequest)
			return
		}
		ev, err := payreq.VerifyWebhook(secret, r.Header, body)
		if err != nil {
			http.Error(w, "not a payreq delivery", http.StatusBadRequest)
			return
		}
		mu.Lock()
		dup := seen[r.Header.Get("webhook-id")]
		seen[r.Header.Get("webhook-id")] = true
		mu.Unlock()
		if !dup {
			typ, _ := ev.Discriminator()
			fmt.Fprintf(out, "%s %s\n", typ, r.Header.Get("webhook-id"))
		}
		w.WriteHeader(http.StatusNoContent)
	})
}
