package fakellm

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"time"

	openai "github.com/sashabaranov/go-openai"
)

// The batch API: POST /v1/files (purpose "batch"), POST /v1/batches, GET /v1/batches,
// GET /v1/batches/{id}, POST /v1/batches/{id}/cancel and GET /v1/files/{id}/content, in
// OpenAI's shapes. A batch moves validating -> in_progress -> finalizing -> completed
// over Options.BatchLatency (or ends expired with Options.BatchExpire); HoldBatches keeps
// every batch in progress until ReleaseBatches. Its lines are answered by Respond when
// the batch ends.

// batchState is the server's files and batches.
type batchState struct {
	files   map[string][]byte
	batches []*fakeBatch
	held    bool
	lines   int
	uploads int
	polls   int
	// submitted counts each custom_id over every batch created, to show a client never
	// submitted one twice.
	submitted map[string]int
}

type fakeBatch struct {
	openai.Batch
	created time.Time
	lines   []batchInputLine
	ended   bool
}

type batchInputLine struct {
	CustomID string                       `json:"custom_id"`
	Method   string                       `json:"method"`
	URL      string                       `json:"url"`
	Body     openai.ChatCompletionRequest `json:"body"`
}

func (s *Server) batchRoutes(mux *http.ServeMux) {
	mux.HandleFunc("POST /v1/files", s.serveUpload)
	mux.HandleFunc("GET /v1/files/{id}/content", s.serveFileContent)
	mux.HandleFunc("POST /v1/batches", s.serveCreateBatch)
	mux.HandleFunc("GET /v1/batches", s.serveListBatches)
	mux.HandleFunc("GET /v1/batches/{id}", s.serveGetBatch)
	mux.HandleFunc("POST /v1/batches/{id}/cancel", s.serveCancelBatch)
}

// HoldBatches keeps every batch, the ones already created too, in progress until
// ReleaseBatches: a test can stop a client while its batch is in flight.
func (s *Server) HoldBatches() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.batch.held = true
}

// ReleaseBatches lets held batches go on to their end.
func (s *Server) ReleaseBatches() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.batch.held = false
}

// BatchesCreated counts the batches created (POST /v1/batches that succeeded).
func (s *Server) BatchesCreated() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.batch.batches)
}

// BatchRequests counts the request lines of every batch created.
func (s *Server) BatchRequests() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, b := range s.batch.batches {
		n += len(b.lines)
	}
	return n
}

// BatchDuplicates counts the custom_ids submitted in more than one line over every batch
// created: a client that never submits a call twice keeps it at 0.
func (s *Server) BatchDuplicates() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, c := range s.batch.submitted {
		if c > 1 {
			n++
		}
	}
	return n
}

// BatchStatuses are the statuses of the batches created, in creation order, as a
// client would see them now.
func (s *Server) BatchStatuses() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, b := range s.batch.batches {
		s.advanceLocked(b)
		out = append(out, b.Status)
	}
	return out
}

func (s *Server) serveUpload(w http.ResponseWriter, r *http.Request) {
	if !s.authorized(w, r) {
		return
	}
	if err := r.ParseMultipartForm(256 << 20); err != nil {
		writeError(w, http.StatusBadRequest, "could not parse the multipart body: "+err.Error(), "invalid_request_error", "invalid_body")
		return
	}
	if p := r.FormValue("purpose"); p != string(openai.PurposeBatch) {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("purpose %q: this server takes batch files only", p), "invalid_request_error", "invalid_purpose")
		return
	}
	f, hdr, err := r.FormFile("file")
	if err != nil {
		writeError(w, http.StatusBadRequest, "no file: "+err.Error(), "invalid_request_error", "missing_file")
		return
	}
	defer f.Close()
	data, err := io.ReadAll(f)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error(), "invalid_request_error", "invalid_file")
		return
	}
	s.mu.Lock()
	if s.batch.files == nil {
		s.batch.files = map[string][]byte{}
	}
	s.batch.uploads++
	id := "file-fake-" + strconv.Itoa(s.batch.uploads)
	s.batch.files[id] = data
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, map[string]any{"id": id, "object": "file", "bytes": len(data), "created_at": time.Now().Unix(),
		"filename": hdr.Filename, "purpose": "batch"})
}

func (s *Server) serveFileContent(w http.ResponseWriter, r *http.Request) {
	if !s.authorized(w, r) {
		return
	}
	s.mu.Lock()
	data, ok := s.batch.files[r.PathValue("id")]
	s.mu.Unlock()
	if !ok {
		writeError(w, http.StatusNotFound, "no such file "+r.PathValue("id"), "invalid_request_error", "not_found")
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	_, _ = w.Write(data)
}

func (s *Server) serveCreateBatch(w http.ResponseWriter, r *http.Request) {
	if !s.authorized(w, r) {
		return
	}
	var req openai.CreateBatchRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		writeError(w, http.StatusBadRequest, "could not parse the JSON body: "+err.Error(), "invalid_request_error", "invalid_json")
		return
	}
	if req.Endpoint != openai.BatchEndpointChatCompletions || req.CompletionWindow != "24h" {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("endpoint %q, completion_window %q: want /v1/chat/completions and 24h", req.Endpoint, req.CompletionWindow), "invalid_request_error", "invalid_value")
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	data, ok := s.batch.files[req.InputFileID]
	if !ok {
		writeError(w, http.StatusBadRequest, "no such file "+req.InputFileID, "invalid_request_error", "not_found")
		return
	}
	now := time.Now()
	b := &fakeBatch{created: now}
	b.ID = "batch_fake_" + strconv.Itoa(len(s.batch.batches)+1)
	b.Object, b.Endpoint, b.InputFileID, b.CompletionWindow = "batch", req.Endpoint, req.InputFileID, req.CompletionWindow
	b.Status, b.CreatedAt, b.Metadata = "validating", int(now.Unix()), req.Metadata
	expires := int(now.Add(24 * time.Hour).Unix())
	b.ExpiresAt = &expires
	seen := map[string]bool{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 64<<10), 64<<20)
	for n := 1; sc.Scan(); n++ {
		var l batchInputLine
		err := json.Unmarshal(sc.Bytes(), &l)
		switch {
		case err != nil:
			writeError(w, http.StatusBadRequest, fmt.Sprintf("line %d: %v", n, err), "invalid_request_error", "invalid_jsonl")
			return
		case l.CustomID == "" || seen[l.CustomID]:
			writeError(w, http.StatusBadRequest, fmt.Sprintf("line %d: custom_id %q missing or repeated", n, l.CustomID), "invalid_request_error", "duplicate_custom_id")
			return
		case l.Method != http.MethodPost || l.URL != string(openai.BatchEndpointChatCompletions):
			writeError(w, http.StatusBadRequest, fmt.Sprintf("line %d: %s %s: want POST /v1/chat/completions", n, l.Method, l.URL), "invalid_request_error", "invalid_url")
			return
		}
		if len(b.lines) > 0 && l.Body.Model != b.lines[0].Body.Model {
			// OpenAI's rule: one model per batch file.
			writeError(w, http.StatusBadRequest, fmt.Sprintf("line %d: model %q: every request of a batch must use the model of the first, %q", n, l.Body.Model, b.lines[0].Body.Model), "invalid_request_error", "mixed_models")
			return
		}
		seen[l.CustomID] = true
		b.lines = append(b.lines, l)
	}
	if s.batch.submitted == nil {
		s.batch.submitted = map[string]int{}
	}
	for _, l := range b.lines {
		s.batch.submitted[l.CustomID]++
	}
	b.RequestCounts.Total = len(b.lines)
	s.batch.batches = append(s.batch.batches, b)
	writeJSON(w, http.StatusOK, b.Batch)
}

func (s *Server) serveGetBatch(w http.ResponseWriter, r *http.Request) {
	if !s.authorized(w, r) {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	b := s.findBatchLocked(r.PathValue("id"))
	if b == nil {
		writeError(w, http.StatusNotFound, "no such batch "+r.PathValue("id"), "invalid_request_error", "not_found")
		return
	}
	s.batch.polls++
	s.advanceLocked(b)
	writeJSON(w, http.StatusOK, b.Batch)
}

// BatchPolls counts GET /v1/batches/{id}: a client looking at a batch it created.
func (s *Server) BatchPolls() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.batch.polls
}

func (s *Server) serveListBatches(w http.ResponseWriter, r *http.Request) {
	if !s.authorized(w, r) {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	after := r.URL.Query().Get("after")
	limit, _ := strconv.Atoi(r.URL.Query().Get("limit"))
	if limit <= 0 || limit > 100 {
		limit = 20
	}
	var data []openai.Batch
	started := after == ""
	all := slices.Clone(s.batch.batches)
	slices.Reverse(all) // newest first, as OpenAI lists them
	more := false
	for _, b := range all {
		if !started {
			started = b.ID == after
			continue
		}
		if len(data) == limit {
			more = true
			break
		}
		s.advanceLocked(b)
		data = append(data, b.Batch)
	}
	resp := map[string]any{"object": "list", "data": data, "has_more": more}
	if len(data) > 0 {
		resp["first_id"], resp["last_id"] = data[0].ID, data[len(data)-1].ID
	}
	writeJSON(w, http.StatusOK, resp)
}

func (s *Server) serveCancelBatch(w http.ResponseWriter, r *http.Request) {
	if !s.authorized(w, r) {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	b := s.findBatchLocked(r.PathValue("id"))
	if b == nil {
		writeError(w, http.StatusNotFound, "no such batch "+r.PathValue("id"), "invalid_request_error", "not_found")
		return
	}
	if !b.ended {
		now := int(time.Now().Unix())
		b.Status, b.CancelledAt, b.ended = "cancelled", &now, true
		b.RequestCounts.Failed = len(b.lines)
	}
	writeJSON(w, http.StatusOK, b.Batch)
}

func (s *Server) findBatchLocked(id string) *fakeBatch {
	for _, b := range s.batch.batches {
		if b.ID == id {
			return b
		}
	}
	return nil
}

// advanceLocked moves b along its schedule, answering its lines when it ends.
func (s *Server) advanceLocked(b *fakeBatch) {
	if b.ended {
		return
	}
	lat := s.opts.BatchLatency
	age := time.Since(b.created)
	switch {
	case age < lat/10:
		b.Status = "validating"
		return
	case s.batch.held || age < lat-lat/10:
		b.Status = "in_progress"
		return
	case age < lat:
		b.Status = "finalizing"
		return
	}
	now := int(time.Now().Unix())
	var out, errs bytes.Buffer
	for i, l := range b.lines {
		s.batch.lines++
		n := s.batch.lines
		rid := fmt.Sprintf("batch_req_%s_%d", b.ID, i+1)
		if s.opts.BatchExpire {
			writeLine(&errs, map[string]any{"id": rid, "custom_id": l.CustomID, "response": nil,
				"error": map[string]any{"code": "batch_expired", "message": "This request could not be executed before the completion window expired."}})
			b.RequestCounts.Failed++
			continue
		}
		var reply Reply
		if s.opts.Respond != nil {
			reply = s.opts.Respond(l.Body, n)
		}
		status := reply.Status
		if status == 0 {
			status = http.StatusOK
		}
		if status >= 300 {
			typ, code := errorKind(status)
			msg := firstNonEmpty(reply.Content, http.StatusText(status))
			writeLine(&errs, map[string]any{"id": rid, "custom_id": l.CustomID, "error": nil, "response": map[string]any{
				"status_code": status, "request_id": rid,
				"body": map[string]any{"error": map[string]any{"message": msg, "type": firstNonEmpty(reply.ErrorType, typ), "code": firstNonEmpty(reply.ErrorCode, code)}}}})
			b.RequestCounts.Failed++
			continue
		}
		writeLine(&out, map[string]any{"id": rid, "custom_id": l.CustomID, "error": nil, "response": map[string]any{
			"status_code": http.StatusOK, "request_id": rid, "body": completion(l.Body, reply, n, b.created, "")}})
		b.RequestCounts.Completed++
	}
	store := func(buf *bytes.Buffer) *string {
		if buf.Len() == 0 {
			return nil
		}
		s.batch.uploads++
		id := "file-fake-" + strconv.Itoa(s.batch.uploads)
		s.batch.files[id] = buf.Bytes()
		return &id
	}
	b.OutputFileID, b.ErrorFileID = store(&out), store(&errs)
	b.ended = true
	if s.opts.BatchExpire {
		b.Status, b.ExpiredAt = "expired", &now
		return
	}
	b.Status, b.CompletedAt = "completed", &now
}

func writeLine(buf *bytes.Buffer, v any) {
	data, _ := json.Marshal(v)
	buf.Write(data)
	buf.WriteByte('\n')
}
