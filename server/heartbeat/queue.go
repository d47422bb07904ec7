package heartbeat

// pendingQueue is the FIFO of nodes whose timer expired and that wait to be
// marked. It is intrusive (the links live in the entries) so that a node
// which heartbeats while queued leaves it in O(1) without searching.
type pendingQueue struct {
	head, tail *entry
	n          int
}

// push appends e at the back.
func (q *pendingQueue) push(e *entry) {
	e.prev, e.next = q.tail, nil
	if q.tail == nil {
		q.head = e
	} else {
		q.tail.next = e
	}
	q.tail = e
	q.n++
}

// pop removes and returns the front entry, or nil when the queue is empty.
func (q *pendingQueue) pop() *entry {
	e := q.head
	if e != nil {
		q.remove(e)
	}
	return e
}

// remove takes e out of the queue; e must be in it.
func (q *pendingQueue) remove(e *entry) {
	if e.prev == nil {
		q.head = e.next
	} else {
		e.prev.next = e.next
	}
	if e.next == nil {
		q.tail = e.prev
	} else {
		e.next.prev = e.prev
	}
	e.prev, e.next = nil, nil
	q.n--
}

// len returns how many entries are queued.
func (q *pendingQueue) len() int {
	return q.n
}
