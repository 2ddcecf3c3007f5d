package localstate

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestPrepareIgnoresEverything(t *testing.T) {
	dir := filepath.Join(t.TempDir(), DirName)
	created, err := Prepare(dir)
	if err != nil || !created {
		t.Fatalf("Prepare: %v %v", created, err)
	}
	data, err := os.ReadFile(filepath.Join(dir, ".gitignore"))
	if err != nil || !strings.Contains(string(data), "\n*\n") {
		t.Fatalf(".gitignore %q %v", data, err)
	}
	// A second run finds it and changes nothing.
	os.WriteFile(filepath.Join(dir, ".gitignore"), []byte("mine\n"), 0o644)
	if created, err := Prepare(dir); err != nil || created {
		t.Fatalf("second Prepare: %v %v", created, err)
	}
	if data, _ := os.ReadFile(filepath.Join(dir, ".gitignore")); string(data) != "mine\n" {
		t.Fatalf("an existing folder's files were rewritten: %q", data)
	}
	file := filepath.Join(t.TempDir(), "file")
	os.WriteFile(file, nil, 0o644)
	if _, err := Prepare(file); err == nil {
		t.Fatal("a file was accepted as the state folder")
	}
}

// TestOneHolderAtATime: the second process sees who holds the folder, waits, and gets it
// once the first lets go.
func TestOneHolderAtATime(t *testing.T) {
	dir := t.TempDir()
	first, h, err := TryAcquire(dir, Holder{PID: 11, Command: "run", Since: time.Now()})
	if err != nil || first == nil || h != nil {
		t.Fatalf("first: %v %v %v", first, h, err)
	}
	second, h, err := TryAcquire(dir, Me("run"))
	if err != nil || second != nil || h == nil || h.PID != 11 || h.Command != "run" {
		t.Fatalf("second: %v %+v %v", second, h, err)
	}
	if !strings.Contains(h.String(), "tribunal run (pid 11") {
		t.Fatalf("holder %q", h)
	}
	got := make(chan *Lock)
	var told Holder
	go func() {
		l, err := Acquire(context.Background(), dir, Me("run"), Options{Signal: true, Waiting: func(h Holder) { told = h }})
		if err != nil {
			t.Error(err)
		}
		got <- l
	}()
	deadline := time.After(30 * time.Second)
	for !first.Wanted() {
		select {
		case <-deadline:
			t.Fatal("the waiting process never signalled")
		case <-time.After(20 * time.Millisecond):
		}
	}
	select {
	case <-got:
		t.Fatal("acquired while held")
	case <-time.After(300 * time.Millisecond):
	}
	if err := first.Release(); err != nil {
		t.Fatal(err)
	}
	var l *Lock
	select {
	case l = <-got:
	case <-time.After(30 * time.Second):
		t.Fatal("never acquired after release")
	}
	if told.PID != 11 {
		t.Fatalf("the waiter was told %+v", told)
	}
	if ReadHolder(dir).PID != os.Getpid() {
		t.Fatalf("holder after the hand-over: %+v", ReadHolder(dir))
	}
	if err := WaitIdle(context.Background(), dir); err != nil {
		t.Fatal(err)
	}
	l.Release()
}

// TestWaitEndsWithContext: a bounded wait gives up and says for whom it waited.
func TestWaitEndsWithContext(t *testing.T) {
	dir := t.TempDir()
	held, _, _ := TryAcquire(dir, Holder{PID: 7, Command: "view", Since: time.Now()})
	defer held.Release()
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	_, err := Acquire(ctx, dir, Me("run"), Options{})
	if err == nil || !strings.Contains(err.Error(), "tribunal view (pid 7") {
		t.Fatalf("err %v", err)
	}
}
