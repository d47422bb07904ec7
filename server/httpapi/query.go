package httpapi

import (
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// eventStreamPath is the event stream's path, where ?index is where the
// stream starts rather than a blocking query's index.
const eventStreamPath = "/v1/event/stream"

// rewriteQuery turns the query parameters operators know from Nomad into
// the field paths the generated handlers fill:
//
//	?index=N       query.min_index (from_index on the event stream)
//	?wait=30s      query.max_wait (a Duration, written in seconds as protojson
//	               reads it); a bare number is seconds
//	?stale         query.allow_stale (also ?stale=true; ?stale=false is none)
//	?prefix=p      page.prefix
//	?per_page=n    page.page_size
//	?next_token=t  page.next_token
//
// Parameters the request message has no field for are ignored by the
// handlers. A value that does not parse is an error naming the parameter.
func rewriteQuery(u *url.URL) error {
	if u.RawQuery == "" {
		return nil
	}
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return fmt.Errorf("query string: %w", err)
	}
	indexField := "query.min_index"
	if u.Path == eventStreamPath {
		indexField = "from_index"
	}
	if v, ok := take(q, "index"); ok {
		if _, err := strconv.ParseUint(v, 10, 64); err != nil {
			return fmt.Errorf("?index=%q: not an index: %w", v, err)
		}
		q.Set(indexField, v)
	}
	if v, ok := take(q, "wait"); ok {
		d, err := parseWait(v)
		if err != nil {
			return err
		}
		q.Set("query.max_wait", strconv.FormatFloat(d.Seconds(), 'f', -1, 64)+"s")
	}
	if v, ok := take(q, "stale"); ok {
		stale := true
		if v != "" {
			if stale, err = strconv.ParseBool(v); err != nil {
				return fmt.Errorf("?stale=%q: want no value, true or false: %w", v, err)
			}
		}
		if stale {
			q.Set("query.allow_stale", "true")
		}
	}
	for from, to := range map[string]string{"prefix": "page.prefix", "per_page": "page.page_size", "next_token": "page.next_token"} {
		if v, ok := take(q, from); ok {
			q.Set(to, v)
		}
	}
	u.RawQuery = q.Encode()
	return nil
}

// take removes a parameter and returns its first value.
func take(q url.Values, key string) (string, bool) {
	vs, ok := q[key]
	if !ok {
		return "", false
	}
	delete(q, key)
	if len(vs) == 0 {
		return "", true
	}
	return vs[0], true
}

// parseWait reads ?wait: a Go duration ("30s", "2m") or, as Nomad also
// takes, a number of seconds.
func parseWait(v string) (time.Duration, error) {
	if n, err := strconv.ParseUint(v, 10, 32); err == nil {
		return time.Duration(n) * time.Second, nil
	}
	d, err := time.ParseDuration(strings.TrimSpace(v))
	if err != nil {
		return 0, fmt.Errorf("?wait=%q: want a duration such as 30s: %w", v, err)
	}
	if d < 0 {
		return 0, fmt.Errorf("?wait=%q: negative", v)
	}
	return d, nil
}

// isLongLived reports whether a request may wait for a change for long: a
// blocking query or the event stream. Shutdown ends those rather than wait
// for them.
func isLongLived(r *http.Request) bool {
	q := r.URL.Query()
	return r.URL.Path == eventStreamPath || q.Has("index") || q.Has("query.min_index")
}
