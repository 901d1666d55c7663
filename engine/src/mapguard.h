/* mapguard.h — a mapped model file that shrinks under the engine (truncated
 * in place by a re-download, a network drive that drops) must not kill the
 * process with SIGBUS. A guarded mapping's faulting page and the rest of it
 * become zero-filled anonymous memory instead, the fault is counted, and the
 * engine refuses generations with COLI_E_FILE_CHANGED ("model_file_changed")
 * from then on (what a fault lets the current pass read is garbage). */
#ifndef COLI_MAPGUARD_H
#define COLI_MAPGUARD_H

#include <stddef.h>

/* Guard [base, base + size) (page aligned, a read-only file mapping): a slot
 * id >= 0, or -1 when the process-wide table is full (the mapping then runs
 * unguarded, as before). Installs the SIGBUS handler on first use, chaining
 * to whatever handler was there for faults outside guarded mappings. */
int coli_mapguard_add(const void *base, size_t size);
void coli_mapguard_remove(int id);
/* Faults absorbed in slot id so far (0 for id < 0). */
int coli_mapguard_faults(int id);

#endif
