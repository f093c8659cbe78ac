/*
** dump.h -- WEFT_DUMP: which compile stages print to stderr.
**
** WEFT_DUMP is a comma-separated list of stage names: ir, ad, llvm, cuda,
** time. A stage is wanted when its name is one whole item of the list
** ("WEFT_DUMP=ir,cuda" wants "ir" and "cuda", not "ad").
*/
#ifndef WF_DUMP_H
#define WF_DUMP_H

#include "util/util.h"

/* 1 if stage is an item of the list spec (NULL: none), else 0. */
WF_INTERNAL int wf_dump_in(const char *spec, const char *stage);
/* wf_dump_in(getenv("WEFT_DUMP"), stage). */
WF_INTERNAL int wf_dump_wanted(const char *stage);

#endif
