// Package audit writes drover's audit trail (the server's -audit-log FILE):
// one JSON object per line for every write call and every denied call, saying
// who called what, naming which objects, and how it ended.
//
// The server acknowledges a call only after its line is written, so Write is
// on the path of every write call. Log therefore commits lines in groups:
// callers that arrive while a line is being written queue theirs, and the
// next write(2) carries the whole queue, so thousands of concurrent calls a
// second cost far fewer syscalls (and, with WithSync, fsyncs) than lines.
//
// Durability: by default a line counts as written once write(2) has returned.
// It is then in the kernel's page cache: it survives a crash or kill of the
// drover process, but not a power loss or kernel crash. WithSync(true) also
// fsyncs every group before its callers return, which survives a power loss
// at the price of one fsync per group (see WithSync).
//
// Rotation: rename the file, then have the server call Reopen (on SIGHUP),
// as logrotate's default create mode does; copytruncate is not needed, and
// no line is lost or split between the two files.
package audit
