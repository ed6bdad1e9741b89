/*
 * qmd_rank: an FTS5 auxiliary function for qmd's lexical search, loaded into SQLite as an
 * extension (adapters/sqlite/rank_ext.py builds it, a connection loads it at its second lexical
 * search; docs/decisions/0051).
 *
 *   qmd_bm25(documents_fts, weight, ...)  ->  the value FTS5's own bm25(documents_fts, weight,
 *                                             ...) gives the row, computed the same way
 *
 * Why: FTS5's bm25 reads each ranked row's token count with one lookup in the table's
 * docsize shadow table; that lookup is three quarters of its cost per row (about 0.4 of
 * 0.55 us; benchmarks/README.md, "The any-term fill"). This function keeps the counts it has
 * read in a per-connection array indexed by rowid, so a long-lived process (the MCP server)
 * reads each count once until the index changes (REQ-SEARCH-RANKCACHE-001).
 *
 * The cache is trusted only while nothing can have changed the counts: it is used outside
 * explicit transactions only (their writes are not committed, so the data version does not
 * show them yet, and they may be rolled back), and it is emptied whenever the database's data
 * version (SQLITE_FCNTL_DATA_VERSION: any commit, by this connection or another) differs from
 * the one it was filled under.
 *
 * One connection ranks one table with it (qmd: `documents_fts` in `main`): the cache is keyed
 * by rowid alone, and the data version it trusts is the main database's.
 *
 * Built against the system's SQLite headers (Debian: libsqlite3-dev), whose sqlite3.h carries
 * the FTS5 extension API; SQLite routines are called through the loading library's table
 * (SQLITE_EXTENSION_INIT), so the SQLite that loads it (pysqlite3's) is the one that runs it.
 */
#include <sqlite3ext.h>
SQLITE_EXTENSION_INIT1

#include <math.h>
#include <string.h>

/* BM25's constants, FTS5's values */
#define QMD_K1 1.2
#define QMD_B 0.75

/* Token counts per rowid for one connection. sizes[rowid] holds count + 1; 0 is unknown. */
typedef struct SizeCache {
  int *sizes;
  sqlite3_int64 capacity;     /* entries allocated in sizes */
  unsigned int data_version;  /* SQLITE_FCNTL_DATA_VERSION when filled */
  sqlite3_int64 rows;         /* the table's row count (bounds the array's size) */
} SizeCache;

/* What one statement computes once (FTS5 auxiliary data): the query's inverse document
 * frequencies, the mean row length, and whether the cache may be used. */
typedef struct QueryStats {
  int phrases;
  int cache_usable;
  double mean_tokens;
  double *idf;
  double *freq; /* per row: the weighted hit count of each phrase */
} QueryStats;

static void size_cache_clear(SizeCache *cache) {
  if (cache->sizes != 0) memset(cache->sizes, 0, sizeof(int) * (size_t)cache->capacity);
}

static void size_cache_free(void *pointer) {
  SizeCache *cache = (SizeCache *)pointer;
  if (cache == 0) return;
  sqlite3_free(cache->sizes);
  sqlite3_free(cache);
}

/* Whether the cache may serve this statement; empties it when the index may have changed. */
static int size_cache_prepare(SizeCache *cache, sqlite3 *db, sqlite3_int64 rows) {
  unsigned int version = 0;
  if (cache == 0 || db == 0 || !sqlite3_get_autocommit(db)) return 0;
  if (sqlite3_file_control(db, "main", SQLITE_FCNTL_DATA_VERSION, &version) != SQLITE_OK) {
    return 0;
  }
  if (version != cache->data_version) {
    size_cache_clear(cache);
    cache->data_version = version;
  }
  cache->rows = rows;
  return 1;
}

/* Room for `rowid`, grown geometrically; 0 when it will not be cached (out of range, or no
 * memory: the row is then read from the table, never an error). */
static int size_cache_reserve(SizeCache *cache, sqlite3_int64 rowid) {
  /* ids far beyond the row count (a sparse table) are not worth the memory */
  sqlite3_int64 limit = 8 * cache->rows + 65536;
  if (rowid < 0 || rowid >= limit) return 0;
  if (rowid < cache->capacity) return 1;
  sqlite3_int64 wanted = cache->capacity > 0 ? cache->capacity : 1024;
  while (wanted <= rowid) wanted *= 2;
  if (wanted > limit) wanted = limit;
  int *grown = (int *)sqlite3_realloc64(cache->sizes, sizeof(int) * (sqlite3_uint64)wanted);
  if (grown == 0) return 0;
  memset(grown + cache->capacity, 0, sizeof(int) * (size_t)(wanted - cache->capacity));
  cache->sizes = grown;
  cache->capacity = wanted;
  return 1;
}

static int count_row(const Fts5ExtensionApi *api, Fts5Context *fts, void *counter) {
  (void)api;
  (void)fts;
  (*(sqlite3_int64 *)counter)++;
  return SQLITE_OK;
}

/* The statement's QueryStats, computed on its first row as FTS5's bm25 computes them. */
static QueryStats *query_stats(const Fts5ExtensionApi *api, Fts5Context *fts,
                               sqlite3_context *ctx, int *rc) {
  QueryStats *stats = (QueryStats *)api->xGetAuxdata(fts, 0);
  if (stats != 0) return stats;
  int phrases = api->xPhraseCount(fts);
  sqlite3_int64 bytes = (sqlite3_int64)sizeof(QueryStats) +
                        (sqlite3_int64)sizeof(double) * 2 * (phrases > 0 ? phrases : 1);
  stats = (QueryStats *)sqlite3_malloc64((sqlite3_uint64)bytes);
  if (stats == 0) {
    *rc = SQLITE_NOMEM;
    return 0;
  }
  memset(stats, 0, (size_t)bytes);
  stats->phrases = phrases;
  stats->idf = (double *)&stats[1];
  stats->freq = &stats->idf[phrases > 0 ? phrases : 1];
  sqlite3_int64 rows = 0;
  sqlite3_int64 tokens = 0;
  *rc = api->xRowCount(fts, &rows);
  if (*rc == SQLITE_OK) *rc = api->xColumnTotalSize(fts, -1, &tokens);
  if (*rc == SQLITE_OK) stats->mean_tokens = (double)tokens / (double)rows;
  for (int i = 0; *rc == SQLITE_OK && i < phrases; i++) {
    sqlite3_int64 hits = 0;
    *rc = api->xQueryPhrase(fts, i, (void *)&hits, count_row);
    if (*rc == SQLITE_OK) {
      /* FTS5's floor: a phrase in more than half the rows would otherwise score below 0 */
      double idf = log((rows - hits + 0.5) / (hits + 0.5));
      stats->idf[i] = idf <= 0.0 ? 1e-6 : idf;
    }
  }
  if (*rc == SQLITE_OK) {
    SizeCache *cache = (SizeCache *)api->xUserData(fts);
    stats->cache_usable =
        size_cache_prepare(cache, sqlite3_context_db_handle(ctx), rows);
    *rc = api->xSetAuxdata(fts, stats, sqlite3_free);
  } else {
    sqlite3_free(stats);
  }
  return *rc == SQLITE_OK ? stats : 0;
}

/* The row's token count, from the cache when it holds it. */
static int row_tokens(const Fts5ExtensionApi *api, Fts5Context *fts, const QueryStats *stats,
                      int *tokens) {
  SizeCache *cache = (SizeCache *)api->xUserData(fts);
  sqlite3_int64 rowid = api->xRowid(fts);
  int cached = stats->cache_usable && size_cache_reserve(cache, rowid);
  if (cached && cache->sizes[rowid] > 0) {
    *tokens = cache->sizes[rowid] - 1;
    return SQLITE_OK;
  }
  int rc = api->xColumnSize(fts, -1, tokens);
  if (rc == SQLITE_OK && cached && *tokens >= 0 && *tokens < 0x7fffffff) {
    cache->sizes[rowid] = *tokens + 1;
  }
  return rc;
}

static void qmd_bm25(const Fts5ExtensionApi *api, Fts5Context *fts, sqlite3_context *ctx,
                     int argc, sqlite3_value **argv) {
  int rc = SQLITE_OK;
  QueryStats *stats = query_stats(api, fts, ctx, &rc);
  if (stats == 0) {
    sqlite3_result_error_code(ctx, rc);
    return;
  }
  memset(stats->freq, 0, sizeof(double) * (size_t)(stats->phrases > 0 ? stats->phrases : 1));
  int hits = 0;
  rc = api->xInstCount(fts, &hits);
  /* hits in FTS5's order, so each phrase's weighted count sums exactly as bm25's does */
  for (int i = 0; rc == SQLITE_OK && i < hits; i++) {
    int phrase = 0;
    int column = 0;
    int offset = 0;
    rc = api->xInst(fts, i, &phrase, &column, &offset);
    if (rc == SQLITE_OK) {
      stats->freq[phrase] += argc > column ? sqlite3_value_double(argv[column]) : 1.0;
    }
  }
  int tokens = 0;
  if (rc == SQLITE_OK) rc = row_tokens(api, fts, stats, &tokens);
  if (rc != SQLITE_OK) {
    sqlite3_result_error_code(ctx, rc);
    return;
  }
  double length = (double)tokens;
  double score = 0.0;
  for (int i = 0; i < stats->phrases; i++) {
    double freq = stats->freq[i];
    /* the same association as FTS5's, so the result is the same double */
    score += stats->idf[i] * ((freq * (QMD_K1 + 1.0)) /
                              (freq + QMD_K1 * (1 - QMD_B + QMD_B * length / stats->mean_tokens)));
  }
  sqlite3_result_double(ctx, -1.0 * score);
}

static fts5_api *fts5_api_of(sqlite3 *db) {
  fts5_api *found = 0;
  sqlite3_stmt *stmt = 0;
  if (sqlite3_prepare_v2(db, "SELECT fts5(?1)", -1, &stmt, 0) == SQLITE_OK) {
    sqlite3_bind_pointer(stmt, 1, (void *)&found, "fts5_api_ptr", 0);
    sqlite3_step(stmt);
  }
  sqlite3_finalize(stmt);
  return found;
}

#ifdef _WIN32
__declspec(dllexport)
#endif
int sqlite3_qmdrank_init(sqlite3 *db, char **error, const sqlite3_api_routines *routines) {
  SQLITE_EXTENSION_INIT2(routines);
  fts5_api *fts5 = fts5_api_of(db);
  if (fts5 == 0 || fts5->iVersion < 2) {
    *error = sqlite3_mprintf("qmd_rank: this SQLite has no FTS5 (version 2 or later)");
    return SQLITE_ERROR;
  }
  SizeCache *cache = (SizeCache *)sqlite3_malloc64(sizeof(SizeCache));
  if (cache == 0) return SQLITE_NOMEM;
  memset(cache, 0, sizeof(SizeCache));
  /* the connection owns the cache: FTS5 frees it with the function */
  return fts5->xCreateFunction(fts5, "qmd_bm25", (void *)cache, qmd_bm25, size_cache_free);
}
