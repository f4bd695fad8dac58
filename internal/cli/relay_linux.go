package cli

import (
	"fmt"
	"net"
	"os"

	"golang.org/x/sys/unix"
)

// samePeer refuses a client that is not running as this process's user (root excepted): the
// command it sends runs with the server's rights. The socket's mode already says so; this holds
// also where a directory's permissions do not.
func samePeer(conn net.Conn) error {
	uc, ok := conn.(*net.UnixConn)
	if !ok {
		return fmt.Errorf("not a unix socket connection")
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return err
	}
	var cred *unix.Ucred
	var credErr error
	if err := raw.Control(func(fd uintptr) {
		cred, credErr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return err
	}
	if credErr != nil {
		return fmt.Errorf("reading the client's credentials: %w", credErr)
	}
	if uid := uint32(os.Getuid()); cred.Uid != uid && cred.Uid != 0 {
		return fmt.Errorf("the client runs as uid %d; this server serves only uid %d through its socket", cred.Uid, uid)
	}
	return nil
}

// listenUnix listens on a unix socket at path that only this user can connect to: the umask
// is tightened while the socket is made, so there is no moment when it is open to others.
func listenUnix(path string) (net.Listener, error) {
	old := unix.Umask(0o177)
	defer unix.Umask(old)
	return net.Listen("unix", path)
}

// openRegular opens path for reading only if it is a regular file. The open cannot block: a
// FIFO with no writer, or a device, would hold a server's goroutine and thread in the kernel
// for good, and /dev/stdin would be the server's own input, not its client's.
func openRegular(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	// A file system of process state (procfs, sysfs) mounted elsewhere than hostedPath looks.
	var fs unix.Statfs_t
	if err := unix.Fstatfs(int(f.Fd()), &fs); err != nil {
		f.Close()
		return nil, err
	}
	if fs.Type == unix.PROC_SUPER_MAGIC || fs.Type == unix.SYSFS_MAGIC {
		f.Close()
		return nil, errProcessState
	}
	return regularOnly(f)
}

// peerPID is the pid of the process at the other end of a unix socket connection (for a
// client, the server that listens), as the kernel records it.
func peerPID(conn net.Conn) (int, bool) {
	uc, ok := conn.(*net.UnixConn)
	if !ok {
		return 0, false
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return 0, false
	}
	var cred *unix.Ucred
	var credErr error
	if err := raw.Control(func(fd uintptr) {
		cred, credErr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil || credErr != nil {
		return 0, false
	}
	return int(cred.Pid), true
}
