package main

import (
	"encoding/binary"
	"fmt"
	"os"
	"strconv"
	"sync/atomic"
	"syscall"
	"time"
)

// An invocation file holds one fixed-size record per handler call:
//
//	scheduled unix ms (int64) | started unix ms (int64) | task index + 1 (uint32) | shard (uint32)
//
// little-endian, 24 bytes. The file is mapped shared into the replica
// and written in memory: Record costs no system call (so the recorder adds
// next to nothing to the CPU figures of the system under test), and what a
// handler recorded survives a SIGKILL of its replica (the pages belong to
// the kernel's page cache), which the failover workload depends on; a
// write(2)-buffered file flushed every second would lose the victim's last
// second and count it as missed. The replica is named by the file.
//
// Records are placed by an atomic counter, so they are in no particular
// order and a reserved record may still be zero when read: readers skip
// zero records.
const recordSize = 24

// fileRecorder is the Recorder of a replica process.
type fileRecorder struct {
	f       *os.File
	mem     []byte
	cap     int64
	next    atomic.Int64
	dropped atomic.Int64
}

func newFileRecorder(path string, capacity int64) (*fileRecorder, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, err
	}
	if err = f.Truncate(capacity * recordSize); err != nil {
		f.Close()
		return nil, err
	}
	mem, err := syscall.Mmap(int(f.Fd()), 0, int(capacity*recordSize), syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("mmap %s: %w", path, err)
	}
	return &fileRecorder{f: f, mem: mem, cap: capacity}, nil
}

// Record implements Recorder. Task codes are taskCode(i).
func (r *fileRecorder) Record(task string, shard int, scheduled, started time.Time) {
	i := r.next.Add(1) - 1
	if i >= r.cap {
		r.dropped.Add(1)
		return
	}
	idx, err := strconv.Atoi(task[1:])
	if err != nil {
		r.dropped.Add(1)
		return
	}
	b := r.mem[i*recordSize : (i+1)*recordSize]
	binary.LittleEndian.PutUint64(b[0:], uint64(scheduled.UnixMilli()))
	binary.LittleEndian.PutUint64(b[8:], uint64(started.UnixMilli()))
	binary.LittleEndian.PutUint32(b[20:], uint32(shard))
	binary.LittleEndian.PutUint32(b[16:], uint32(idx+1))
}

// close unmaps the file; the data is in the file from the moment it was
// written.
func (r *fileRecorder) close() error {
	err := syscall.Munmap(r.mem)
	if cerr := r.f.Close(); err == nil {
		err = cerr
	}
	return err
}

// taskCode is the code of the i-th task of every workload; Record parses
// the index back.
func taskCode(i int) string { return fmt.Sprintf("t%07d", i) }

// invocation is one record read back by the coordinator.
type invocation struct {
	task      int32
	shard     int32 // 0 for a fire that is not sharded
	replica   int32
	scheduled int64 // unix ms
	started   int64 // unix ms
}

// readInvocations appends the records of one replica's file to out.
func readInvocations(path string, replica int, out []invocation) ([]invocation, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return out, err
	}
	for off := 0; off+recordSize <= len(b); off += recordSize {
		rec := b[off : off+recordSize]
		t := binary.LittleEndian.Uint32(rec[16:])
		if t == 0 {
			continue
		}
		out = append(out, invocation{
			task:      int32(t - 1),
			shard:     int32(binary.LittleEndian.Uint32(rec[20:])),
			replica:   int32(replica),
			scheduled: int64(binary.LittleEndian.Uint64(rec[0:])),
			started:   int64(binary.LittleEndian.Uint64(rec[8:])),
		})
	}
	return out, nil
}
