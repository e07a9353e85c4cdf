/* envelope._cread: the read path's hot passes in C: continuation lines routed and appended in
 * one pass, and the UTF-8 check of a batch.
 *
 * One function, route_run(data, start, fast, sizes, opened, max_size), does for a run of
 * lines what the pure-Python reference, the fast path of Reconstructor._feed_run, does
 * for each of them: a line that is exactly a known prefix (type, agent, "final":false,
 * "delta": as this codec encodes them), one JSON string, and the open block's tail (its
 * id and name as this codec encodes them, then "}") is a chunk of that key's open block:
 * its delta is decoded to UTF-8 and gathered for the block (its size counted in code points). It returns the index
 * of the first line it did not take; that line, and every later one, is the caller's.
 *
 * A line is taken only when the reference would take it with the same effect, so that
 * both builds give the same blocks and raise the same errors (the caller's Python path
 * judges every line this one leaves):
 *
 *   - data[i] is bytes and ends in "}", starts with a prefix of `fast` (bytes -> key)
 *     whose key has an open block in `opened` with a tail (bytes, not None), and ends
 *     with that tail;
 *   - between them lies exactly one JSON string: a quote, then bytes that are not a
 *     quote, a backslash or a control below 0x20, or an escape \" \\ \/ \b \f \n \r \t or
 *     \uXXXX that is not a surrogate (a surrogate, paired or lone, is left to the Python
 *     path, which is where the lone-surrogate check of spec 6.4 lives), then a quote;
 *     anything else (whitespace, an odd escape) is left too;
 *   - its bytes are UTF-8 (Python's strict decoder, the one msgspec uses for a string);
 *   - the block stays within max_size code points (spec/limits.md L1).
 *
 * is_utf8(data) is the check StreamReader makes on each batch of SSE lines (_sse._is_utf8):
 * the answer of bytes.decode("utf-8"), strict, without building the str.
 *
 * Within one call no block opens or closes (only continuation lines are taken), so each
 * key's block is looked up once per call and kept in a small table. No str is built per
 * delta: each delta is decoded as UTF-8 straight into its block's bytearray (_Open.buf), within
 * what the bytearray has allocated (it doubles when it must grow), and the bytearray's length
 * and the block's size are written back when the call returns, whatever ended it; Python
 * decodes that bytearray to one str when the transcript is taken (_Open.flush, spec [RF1-b]).
 * Building one str per delta and joining them at the end was where the compiled read path
 * lost to bare msgspec (11x its last-level data misses); a buffer of the call's own, copied
 * to the block's, and a str joined from the block's pieces were most of what was left.
 */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#define MAX_ENTRIES 16

static int
hexval(unsigned char c)
{
    if (c >= '0' && c <= '9') {
        return c - '0';
    }
    if (c >= 'a' && c <= 'f') {
        return c - 'a' + 10;
    }
    if (c >= 'A' && c <= 'F') {
        return c - 'A' + 10;
    }
    return -1;
}

/* The first byte at or after p (before end) that is a quote, a backslash or a control below
 * 0x20 (end if none): eight bytes at a time, then one at a time. */
static const unsigned char *
plain_run(const unsigned char *p, const unsigned char *end)
{
    const uint64_t ones = 0x0101010101010101ULL;
    const uint64_t highs = 0x8080808080808080ULL;
    while (end - p >= 8) {
        uint64_t x;
        memcpy(&x, p, 8);
        uint64_t quote = x ^ (ones * '"');
        uint64_t slash = x ^ (ones * '\\');
        /* a byte is flagged when it is zero (quote, slash) or below 0x20 (x - 0x20 borrows);
         * bytes of 0x80 and above are never flagged (& ~x), and a false flag can only
         * follow a true one, so the first flag is exact */
        uint64_t hit = ((quote - ones) & ~quote) | ((slash - ones) & ~slash) | ((x - ones * 0x20) & ~x);
        hit &= highs;
        if (hit) {
#if (defined(__GNUC__) || defined(__clang__)) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
            return p + (__builtin_ctzll(hit) >> 3);
#else
            break;
#endif
        }
        p += 8;
    }
    while (p < end && *p != '\\' && *p != '"' && *p >= 0x20) {
        p++;
    }
    return p;
}

/* A block of the call. Its deltas are decoded straight into its bytearray (``_Open.buf``):
 * past the bytearray's end, within what it has allocated, during the call (len counts the
 * content), and the bytearray is set to that length when the call returns, whatever ended
 * it. No buffer of the call's own, no copy from one to the block's. */
typedef struct {
    PyObject *prefix; /* bytes, owned */
    PyObject *tail;   /* bytes, owned */
    PyObject *block;  /* owned */
    PyObject *buf;    /* the block's bytearray, owned */
    Py_ssize_t len;   /* the bytes at the start of buf's memory that are content */
    Py_ssize_t size;  /* the block's size (code points) */
    Py_ssize_t size0; /* and at the start of the call */
} Entry;

/* Room in the entry's bytearray for `more` bytes after its content; 0 with an error set when
 * none. What the bytearray has allocated counts (its trailing NUL's byte aside); it grows to
 * twice that at least, so a block of many lines is reallocated a few times. */
static int
reserve(Entry *entry, Py_ssize_t more)
{
    PyByteArrayObject *b = (PyByteArrayObject *)entry->buf;
    Py_ssize_t cap = b->ob_alloc - (b->ob_start - b->ob_bytes) - 1;
    if (b->ob_start != NULL && entry->len + more <= cap) {
        return 1;
    }
    Py_ssize_t want = cap < 512 ? 1024 : cap * 2;
    if (want < entry->len + more) {
        want = entry->len + more;
    }
    /* The content first (it may lie past the end, within the allocation): what a resize keeps */
    Py_SET_SIZE(b, entry->len);
    return PyByteArray_Resize(entry->buf, want) == 0;
}

/* The code points of s[0:n] when it is UTF-8 as Python's strict decoder reads it (no
 * overlong form, no surrogate, nothing past U+10FFFF, no sequence cut short); -1 when not. */
static Py_ssize_t
utf8_count(const unsigned char *s, Py_ssize_t n)
{
    Py_ssize_t i = 0;
    Py_ssize_t count = 0;
    while (i < n) {
        /* ASCII, eight bytes at a time while aligned runs last */
        while (i + 8 <= n) {
            uint64_t word;
            memcpy(&word, s + i, 8);
            if (word & 0x8080808080808080ULL) {
                break;
            }
            i += 8;
            count += 8;
        }
        if (i >= n) {
            break;
        }
        unsigned char c = s[i];
        count++;
        if (c < 0x80) {
            i++;
            continue;
        }
        if (c < 0xC2) {
            return -1; /* a continuation byte first, or an overlong two-byte form */
        }
        if (c < 0xE0) {
            if (i + 1 >= n || (s[i + 1] & 0xC0) != 0x80) {
                return -1;
            }
            i += 2;
            continue;
        }
        if (c < 0xF0) {
            if (i + 2 >= n) {
                return -1;
            }
            unsigned char c1 = s[i + 1];
            unsigned char lo = c == 0xE0 ? 0xA0 : 0x80; /* no overlong form */
            unsigned char hi = c == 0xED ? 0x9F : 0xBF; /* no surrogate */
            if (c1 < lo || c1 > hi || (s[i + 2] & 0xC0) != 0x80) {
                return -1;
            }
            i += 3;
            continue;
        }
        if (c < 0xF5) {
            if (i + 3 >= n) {
                return -1;
            }
            unsigned char c1 = s[i + 1];
            unsigned char lo = c == 0xF0 ? 0x90 : 0x80; /* no overlong form */
            unsigned char hi = c == 0xF4 ? 0x8F : 0xBF; /* nothing past U+10FFFF */
            if (c1 < lo || c1 > hi || (s[i + 2] & 0xC0) != 0x80 || (s[i + 3] & 0xC0) != 0x80) {
                return -1;
            }
            i += 4;
            continue;
        }
        return -1;
    }
    return count;
}

/* Decode the JSON string s[0:n] (quotes included) into out[0:...] (room for n - 2 bytes: an
 * escape never decodes longer than it is); the bytes written, or -1 when the reference must
 * judge it (not one JSON string this pass reads). The bytes are UTF-8 only if the caller's
 * check says so: raw bytes are copied as they are. */
static Py_ssize_t
decode_string(const unsigned char *s, Py_ssize_t n, unsigned char *out)
{
    if (n < 2 || s[0] != '"' || s[n - 1] != '"') {
        return -1;
    }
    const unsigned char *q = s + 1;
    const unsigned char *end = s + n - 1;
    Py_ssize_t w = 0;
    while (q < end) {
        const unsigned char *run = plain_run(q, end);
        memcpy(out + w, q, (size_t)(run - q));
        w += run - q;
        q = run;
        if (q == end) {
            break;
        }
        if (*q != '\\' || q + 1 >= end) {
            return -1; /* a quote inside, a control, or a backslash last */
        }
        unsigned char e = q[1];
        switch (e) {
        case '"':
        case '\\':
        case '/':
            out[w++] = e;
            break;
        case 'b':
            out[w++] = '\b';
            break;
        case 'f':
            out[w++] = '\f';
            break;
        case 'n':
            out[w++] = '\n';
            break;
        case 'r':
            out[w++] = '\r';
            break;
        case 't':
            out[w++] = '\t';
            break;
        case 'u': {
            if (q + 6 > end) {
                return -1;
            }
            int h0 = hexval(q[2]), h1 = hexval(q[3]), h2 = hexval(q[4]), h3 = hexval(q[5]);
            if (h0 < 0 || h1 < 0 || h2 < 0 || h3 < 0) {
                return -1;
            }
            unsigned int cp = (unsigned int)((h0 << 12) | (h1 << 8) | (h2 << 4) | h3);
            if (cp >= 0xD800 && cp <= 0xDFFF) {
                return -1; /* surrogates: the Python path's (spec 6.4) */
            }
            if (cp < 0x80) {
                out[w++] = (unsigned char)cp;
            }
            else if (cp < 0x800) {
                out[w++] = (unsigned char)(0xC0 | (cp >> 6));
                out[w++] = (unsigned char)(0x80 | (cp & 0x3F));
            }
            else {
                out[w++] = (unsigned char)(0xE0 | (cp >> 12));
                out[w++] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
                out[w++] = (unsigned char)(0x80 | (cp & 0x3F));
            }
            q += 4;
            break;
        }
        default:
            return -1;
        }
        q += 2;
    }
    return w;
}

/* The entry of the block that line s[0:n] continues: found in the table, or looked up and
 * added. Returns NULL with no error set when no open block with a tail has its prefix. */
static Entry *
find_entry(const unsigned char *s, Py_ssize_t n, Entry *entries, int *count, PyObject *fast, PyObject *sizes,
           PyObject *opened)
{
    for (int e = 0; e < *count; e++) {
        Py_ssize_t len = PyBytes_GET_SIZE(entries[e].prefix);
        if (len < n && memcmp(s, PyBytes_AS_STRING(entries[e].prefix), len) == 0) {
            return &entries[e];
        }
    }
    if (*count == MAX_ENTRIES) {
        return NULL;
    }
    /* The prefix ends just after the first ,"final":false,"delta": of the line: it cannot
     * occur inside the type's or the agent's JSON string (a quote there is escaped, and a
     * comma is not a backslash), so one lookup finds the key, where the reference tries
     * each prefix length in turn (`sizes`, here only a check that the length is known). */
    static const char MARK[] = ",\"final\":false,\"delta\":";
    const Py_ssize_t mark_len = (Py_ssize_t)(sizeof(MARK) - 1);
    Py_ssize_t longest = 0;
    Py_ssize_t nsizes = PyList_GET_SIZE(sizes);
    for (Py_ssize_t k = 0; k < nsizes; k++) {
        Py_ssize_t size = PyLong_AsSsize_t(PyList_GET_ITEM(sizes, k));
        if (size == -1 && PyErr_Occurred()) {
            return NULL;
        }
        longest = size > longest ? size : longest;
    }
    /* Only as far as the longest prefix reaches: a line that is no chunk is not read whole. */
    Py_ssize_t room = (longest < n ? longest : n) - mark_len;
    const unsigned char *at = NULL;
    for (Py_ssize_t j = 0; j <= room; j++) {
        if (s[j] == ',' && memcmp(s + j, MARK, mark_len) == 0) {
            at = s + j;
            break;
        }
    }
    if (at == NULL) {
        return NULL;
    }
    Py_ssize_t len = (at - s) + mark_len;
    if (len >= n) {
        return NULL;
    }
    int known = 0;
    for (Py_ssize_t k = 0; k < nsizes && !known; k++) {
        known = PyLong_AsSsize_t(PyList_GET_ITEM(sizes, k)) == len;
    }
    if (!known) {
        return NULL;
    }
    {
        PyObject *probe = PyBytes_FromStringAndSize((const char *)s, len);
        if (probe == NULL) {
            return NULL;
        }
        PyObject *prefix = NULL;
        PyObject *key = PyDict_GetItemWithError(fast, probe);
        if (key == NULL) {
            Py_DECREF(probe);
            return NULL; /* not a known prefix (or an error, set) */
        }
        prefix = probe; /* owned by the entry from here */
        PyObject *block = PyDict_GetItemWithError(opened, key);
        if (block == NULL) {
            Py_DECREF(prefix);
            return NULL; /* no open block (or an error, set) */
        }
        PyObject *tail = PyObject_GetAttrString(block, "tail");
        if (tail == NULL) {
            Py_DECREF(prefix);
            return NULL;
        }
        if (!PyBytes_Check(tail)) {
            Py_DECREF(tail);
            Py_DECREF(prefix);
            return NULL;
        }
        PyObject *buf = PyObject_GetAttrString(block, "buf");
        if (buf == NULL) {
            Py_DECREF(tail);
            Py_DECREF(prefix);
            return NULL;
        }
        if (buf == Py_None) {
            Py_DECREF(buf);
            buf = PyByteArray_FromStringAndSize(NULL, 0);
            if (buf == NULL || PyObject_SetAttrString(block, "buf", buf) < 0) {
                Py_XDECREF(buf);
                Py_DECREF(tail);
                Py_DECREF(prefix);
                return NULL;
            }
        }
        PyObject *size_obj = PyObject_GetAttrString(block, "size");
        if (size_obj == NULL) {
            Py_DECREF(buf);
            Py_DECREF(tail);
            Py_DECREF(prefix);
            return NULL;
        }
        Py_ssize_t size = PyLong_AsSsize_t(size_obj);
        Py_DECREF(size_obj);
        if ((size == -1 && PyErr_Occurred()) || !PyByteArray_Check(buf)) {
            Py_DECREF(buf);
            Py_DECREF(tail);
            Py_DECREF(prefix);
            return NULL;
        }
        Entry *entry = &entries[(*count)++];
        entry->prefix = prefix;
        entry->tail = tail;
        Py_INCREF(block);
        entry->block = block;
        entry->buf = buf;
        entry->len = PyByteArray_GET_SIZE(buf);
        entry->size = size;
        entry->size0 = size;
        return entry;
    }
    return NULL;
}

/* Set each block's bytearray to its content's length, write its size back, and release the
 * table; -1 when a write failed (an error is set, and the other entries are still released). */
static int
release(Entry *entries, int count)
{
    int status = 0;
    for (int e = 0; e < count; e++) {
        Entry *entry = &entries[e];
        if (PyByteArray_GET_SIZE(entry->buf) != entry->len) {
            /* within the allocation (reserve made it), so only the length and the NUL move */
            Py_SET_SIZE(entry->buf, entry->len);
            ((PyByteArrayObject *)entry->buf)->ob_start[entry->len] = '\0';
        }
        if (entry->size != entry->size0 && status == 0) {
            PyObject *size = PyLong_FromSsize_t(entry->size);
            if (size == NULL || PyObject_SetAttrString(entry->block, "size", size) < 0) {
                status = -1;
            }
            Py_XDECREF(size);
        }
        Py_DECREF(entry->prefix);
        Py_DECREF(entry->tail);
        Py_DECREF(entry->block);
        Py_DECREF(entry->buf);
    }
    return status;
}

static PyObject *
route_run(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (nargs != 6) {
        PyErr_SetString(PyExc_TypeError, "route_run takes 6 arguments");
        return NULL;
    }
    PyObject *data = args[0], *fast = args[2], *sizes = args[3], *opened = args[4];
    Py_ssize_t start = PyLong_AsSsize_t(args[1]);
    if (start == -1 && PyErr_Occurred()) {
        return NULL;
    }
    Py_ssize_t max_size = PyLong_AsSsize_t(args[5]);
    if (max_size == -1 && PyErr_Occurred()) {
        return NULL;
    }
    if (!PyDict_Check(fast) || !PyList_Check(sizes) || !PyDict_Check(opened) || start < 0) {
        PyErr_SetString(PyExc_TypeError, "route_run(sequence, int >= 0, dict, list, dict, int)");
        return NULL;
    }
    if (!PyList_Check(data)) {
        return PyLong_FromSsize_t(start); /* only a list is read: the rest is the caller's */
    }
    Entry entries[MAX_ENTRIES];
    int count = 0;
    Py_ssize_t i = start;
    Py_ssize_t total = PyList_GET_SIZE(data);
    for (; i < total; i++) {
        PyObject *line = PyList_GET_ITEM(data, i);
        if (!PyBytes_Check(line)) {
            break;
        }
        const unsigned char *s = (const unsigned char *)PyBytes_AS_STRING(line);
        Py_ssize_t n = PyBytes_GET_SIZE(line);
        if (n == 0 || s[n - 1] != '}') {
            break;
        }
        Entry *entry = find_entry(s, n, entries, &count, fast, sizes, opened);
        if (entry == NULL) {
            if (PyErr_Occurred()) {
                release(entries, count);
                return NULL;
            }
            break;
        }
        Py_ssize_t plen = PyBytes_GET_SIZE(entry->prefix);
        Py_ssize_t tlen = PyBytes_GET_SIZE(entry->tail);
        if (n < plen + tlen || memcmp(s + n - tlen, PyBytes_AS_STRING(entry->tail), tlen) != 0) {
            break;
        }
        Py_ssize_t room = n - plen - tlen - 2; /* the string's bytes between its quotes */
        if (room < 0) {
            break;
        }
        if (!reserve(entry, room)) {
            release(entries, count);
            return NULL;
        }
        /* ob_start, not PyByteArray_AS_STRING: that is a static empty string while the
         * bytearray's length is 0, though it has memory (reserve made sure of it) */
        unsigned char *out = (unsigned char *)((PyByteArrayObject *)entry->buf)->ob_start + entry->len;
        Py_ssize_t w = decode_string(s + plen, n - plen - tlen, out);
        if (w < 0) {
            break;
        }
        Py_ssize_t size = utf8_count(out, w);
        if (size < 0 || entry->size + size > max_size) {
            break; /* not UTF-8, or past the limit: the Python path's error */
        }
        entry->len += w;
        entry->size += size;
    }
    if (release(entries, count) < 0) {
        return NULL;
    }
    return PyLong_FromSsize_t(i);
}

static PyObject *
is_utf8(PyObject *self, PyObject *arg)
{
    (void)self;
    if (!PyBytes_Check(arg)) {
        PyErr_SetString(PyExc_TypeError, "is_utf8(bytes)");
        return NULL;
    }
    return PyBool_FromLong(utf8_count((const unsigned char *)PyBytes_AS_STRING(arg), PyBytes_GET_SIZE(arg)) >= 0);
}

/* The lines of data[0:cut] when it is exactly "data: " + a line + "\n\n", again and again,
 * each line without an LF, UTF-8, and at most max_line - 6 bytes long; cut is just after the
 * last "\n\n" of data. What _sse.SSEReader._batch reads with a slice, a split, a count of the
 * LFs, the lines' longest length and a UTF-8 check of the whole (five passes over the bytes,
 * two copies of them); here one pass, and each line's bytes are copied once, into its bytes
 * object. NULL with no error set when data is not that (the caller's Python path reads it). */
static PyObject *
split_lines_of(const unsigned char *s, Py_ssize_t n, Py_ssize_t max_line, Py_ssize_t *cut_out)
{
    Py_ssize_t cut = n - 1;
    while (cut > 0 && !(s[cut] == '\n' && s[cut - 1] == '\n')) {
        cut--;
    }
    cut += 1; /* just after the last "\n\n"; 1 when there is none */
    if (cut < 8) {
        return NULL;
    }
    const uint64_t ones = 0x0101010101010101ULL;
    const uint64_t highs = 0x8080808080808080ULL;
    PyObject *lines = PyList_New(0);
    if (lines == NULL) {
        return NULL;
    }
    Py_ssize_t p = 0;
    while (p < cut) {
        if (cut - p < 8 || memcmp(s + p, "data: ", 6) != 0) {
            goto leave;
        }
        const unsigned char *q = s + p + 6;
        const unsigned char *end = s + cut;
        const unsigned char *r = q;
        int ascii = 1;
        /* The line's end, eight bytes at a time while they hold no LF (and no byte of 0x80
         * and above, which sends the line to the UTF-8 check below). */
        for (;;) {
            while (end - r >= 8) {
                uint64_t x;
                memcpy(&x, r, 8);
                uint64_t lf = x ^ (ones * '\n');
                if (((lf - ones) & ~lf & highs) | (x & highs)) {
                    break;
                }
                r += 8;
            }
            if (r >= end || *r == '\n') {
                break;
            }
            ascii &= *r < 0x80;
            r++;
        }
        /* r < end: data[cut - 1] is an LF */
        Py_ssize_t len = r - q;
        if (len + 6 > max_line || r + 1 >= end || r[1] != '\n') {
            goto leave;
        }
        if (!ascii && utf8_count(q, len) < 0) {
            goto leave;
        }
        PyObject *line = PyBytes_FromStringAndSize((const char *)q, len);
        if (line == NULL || PyList_Append(lines, line) < 0) {
            Py_XDECREF(line);
            Py_DECREF(lines);
            return NULL;
        }
        Py_DECREF(line);
        p = (r - s) + 2;
    }
    *cut_out = cut;
    return lines;
leave:
    Py_DECREF(lines);
    return NULL;
}

static PyObject *
split_lines(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (nargs != 2 || !PyBytes_Check(args[0])) {
        PyErr_SetString(PyExc_TypeError, "split_lines(bytes, int)");
        return NULL;
    }
    Py_ssize_t max_line = PyLong_AsSsize_t(args[1]);
    if (max_line == -1 && PyErr_Occurred()) {
        return NULL;
    }
    Py_ssize_t cut = 0;
    PyObject *lines = split_lines_of((const unsigned char *)PyBytes_AS_STRING(args[0]), PyBytes_GET_SIZE(args[0]),
                                     max_line, &cut);
    if (lines == NULL) {
        if (PyErr_Occurred()) {
            return NULL;
        }
        Py_RETURN_NONE;
    }
    PyObject *out = Py_BuildValue("(Nn)", lines, cut);
    return out;
}

static PyMethodDef methods[] = {
    {"is_utf8", (PyCFunction)is_utf8, METH_O,
     "is_utf8(data) -> bool\n\nWhether data is UTF-8 as bytes.decode('utf-8') reads it, without decoding."},
    {"split_lines", (PyCFunction)(void (*)(void))split_lines, METH_FASTCALL,
     "split_lines(data, max_line) -> (lines, cut) | None\n\n"
     "The data lines of the events data[:cut] when each is one data line, UTF-8, within max_line; None when not."},
    {"route_run", (PyCFunction)(void (*)(void))route_run, METH_FASTCALL,
     "route_run(data, start, fast, sizes, opened, max_size) -> int\n\n"
     "Append the deltas of the continuation lines data[start:] of open blocks; the index of the first line left."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT,
    "envelope._cread",
    "Route the continuation lines of open blocks and append their deltas in one pass (see _cread.pyi).",
    -1,
    methods,
    NULL,
    NULL,
    NULL,
    NULL,
};

PyMODINIT_FUNC
PyInit__cread(void)
{
    return PyModule_Create(&module_def);
}
