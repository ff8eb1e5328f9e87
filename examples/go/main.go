// A Go net/http app run by rein: it serves on the listening socket rein passes as fd 3 (systemd's socket
// activation protocol: LISTEN_FDS, LISTEN_PID), and stops gracefully on SIGTERM, finishing the requests in flight.
// Run outside rein, it listens on $PORT (default 8080) instead.
package main

import (
	"context"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"
)

// listenFdsStart is the first descriptor systemd's protocol passes (SD_LISTEN_FDS_START).
const listenFdsStart = 3

// listener returns the socket rein (or systemd) passed, or a socket of its own when none was passed.
func listener() (net.Listener, error) {
	if pid, err := strconv.Atoi(os.Getenv("LISTEN_PID")); err == nil && pid == os.Getpid() {
		if n, err := strconv.Atoi(os.Getenv("LISTEN_FDS")); err == nil && n >= 1 {
			// The variables are for this process only: a child must not take them as its own.
			os.Unsetenv("LISTEN_PID")
			os.Unsetenv("LISTEN_FDS")
			os.Unsetenv("LISTEN_FDNAMES")
			f := os.NewFile(listenFdsStart, "listen-fd")
			defer f.Close() // FileListener dups the descriptor
			return net.FileListener(f)
		}
	}
	port := os.Getenv("PORT")
	if port == "" {
		port = "8080"
	}
	return net.Listen("tcp", "127.0.0.1:"+port)
}

func main() {
	ln, err := listener()
	if err != nil {
		log.Fatalf("no listening socket: %v", err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/health", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		fmt.Fprintf(w, "hello from go:%d\n", os.Getpid())
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	log.Printf("serving on %s", ln.Addr())

	select {
	case err := <-served:
		log.Fatalf("serve: %v", err)
	case <-ctx.Done():
	}
	// Shutdown stops accepting, closes idle keep-alive connections and waits for the requests in flight;
	// rein keeps the listening socket open, so connections not yet accepted wait for the other instances.
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 9*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil {
		log.Printf("shutdown: %v", err) // past the deadline: the requests still running are cut
	}
	log.Printf("stopped")
}
