// Package kevents turns the operations of Catena's event journal into
// Kubernetes Events: a pure mapping from libchain.Op to facts (Mapper) and
// a sink that records them through client-go's event broadcaster (Sink).
//
// Files:
//
//	doc.go      this comment
//	facts.go    Mapper, Fact and Object: an operation mapped to the Events it makes; the event reasons
//	sink.go     Sink: facts recorded as core/v1 Events through client-go's broadcaster, counted
//	watcher.go  Watcher and Emitter: the journal tailed from its end, each new operation's facts emitted; the Node's held-teardowns Warning
package kevents
