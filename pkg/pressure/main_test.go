package pressure

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// helperEnv makes the test binary a memory-touching helper process for the
// real-cgroup test instead of running tests.
const helperEnv = "EVICTD_PRESSURE_TEST_HELPER"

func TestMain(m *testing.M) {
	if os.Getenv(helperEnv) == "touch" {
		os.Exit(touchHelper())
	}
	code := m.Run()
	if benchTreeDir != "" {
		os.RemoveAll(benchTreeDir)
	}
	os.Exit(code)
}

// touchHelper serves "touch N" lines on stdin: it maps N MiB of anonymous
// memory, writes every page (so it is resident and charged to the helper's
// memory cgroup) and answers "ok". It exits when stdin closes. The mapping is
// made with mmap, not the Go heap, so the garbage collector cannot free it.
func touchHelper() int {
	in := bufio.NewScanner(os.Stdin)
	var keep [][]byte
	for in.Scan() {
		cmd, arg, _ := strings.Cut(in.Text(), " ")
		mib, err := strconv.Atoi(arg)
		if cmd != "touch" || err != nil || mib <= 0 {
			fmt.Printf("bad command %q\n", in.Text())
			return 2
		}
		b, err := unix.Mmap(-1, 0, mib<<20, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
		if err != nil {
			fmt.Printf("mmap: %v\n", err)
			return 1
		}
		for i := 0; i < len(b); i += 4096 {
			b[i] = 1
		}
		keep = append(keep, b)
		fmt.Println("ok")
	}
	_ = keep
	return 0
}
