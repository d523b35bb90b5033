//go:build cgo && linux

package gcpace

/*
#include <stdlib.h>
#ifdef __GLIBC__
#include <malloc.h>
static void switchboard_trim(void) { malloc_trim(0); }
static void switchboard_arenas(int n) { mallopt(M_ARENA_MAX, n); }
#else
static void switchboard_trim(void) {}
static void switchboard_arenas(int n) {}
#endif
*/
import "C"

// arenas bounds glibc's malloc arenas. By default it makes one per thread
// that calls malloc while another holds an arena, up to eight per core,
// and each keeps a few hundred kilobytes that malloc_trim cannot return:
// the SQLite driver calls malloc from whichever of the runtime's threads
// runs the query, so a busy hour left an arena per thread.
const arenas = 2

func init() { C.switchboard_arenas(arenas) }

// trimC hands the free pages of the C allocator back to the system: the
// SQLite driver's memory (page caches, statements) comes from glibc's
// malloc, which keeps what was freed in its arenas. Elsewhere (musl, no
// cgo) it does nothing.
func trimC() { C.switchboard_trim() }
