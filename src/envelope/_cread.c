/* envelope._cread: the read path's hot passes in C: continuation lines routed and appended in
 * one pass, and the UTF-8 check of a batch.
 *
 * One function, route_run(data, start, fast, sizes, opened, max_size), does for a run of
 * lines what the pure-Python reference, the fast path of Reconstructor._feed_run, does
 * for each of them: a line that is exactly a known prefix (type, agent, "final":false,
 * "delta": as this codec encodes them), one JSON string, and the open block's tail (its
 * id and name as this codec encodes them, then "}") is a chunk of that key's open block:
 * its delta is appended to the block's parts and its size counted. It returns the index
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
 * key's block is looked up once per call and kept in a small table; the sizes are written
 * back to the blocks when the call returns, whatever ended it.
 */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#define MAX_ENTRIES 16
#define SMALL_BUF 4096

typedef struct {
    PyObject *prefix; /* bytes, owned */
    PyObject *tail;   /* bytes, owned */
    PyObject *block;  /* owned */
    PyObject *parts;  /* list, owned */
    Py_ssize_t size;
    int dirty;
} Entry;

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

/* The str of the JSON string s[0:n] (quotes included), or NULL with no error set when the
 * reference must judge it; NULL with an error set only for a failed allocation. */
static PyObject *
decode_string(const unsigned char *s, Py_ssize_t n, unsigned char *small)
{
    if (n < 2 || s[0] != '"' || s[n - 1] != '"') {
        return NULL;
    }
    const unsigned char *p = s + 1;
    const unsigned char *end = s + n - 1;
    /* The common case: no escape, decoded in place. */
    const unsigned char *q = plain_run(p, end);
    PyObject *out;
    if (q == end) {
        out = PyUnicode_DecodeUTF8((const char *)p, end - p, NULL);
    }
    else {
        if (*q != '\\') {
            return NULL; /* a quote inside, or a control: not one JSON string */
        }
        Py_ssize_t room = end - p; /* an escape never decodes longer than it is */
        unsigned char *buf = room <= SMALL_BUF ? small : (unsigned char *)PyMem_Malloc(room);
        if (buf == NULL) {
            PyErr_NoMemory();
            return NULL;
        }
        Py_ssize_t w = q - p;
        memcpy(buf, p, w);
        int ok = 1;
        while (q < end) {
            unsigned char c = *q;
            if (c == '"' || c < 0x20) {
                ok = 0;
                break;
            }
            if (c != '\\') {
                const unsigned char *run = plain_run(q, end);
                if (run == q) {
                    ok = 0; /* a control byte */
                    break;
                }
                memcpy(buf + w, q, run - q);
                w += run - q;
                q = run;
                continue;
            }
            if (q + 1 >= end) {
                ok = 0;
                break;
            }
            unsigned char e = q[1];
            switch (e) {
            case '"':
            case '\\':
            case '/':
                buf[w++] = e;
                break;
            case 'b':
                buf[w++] = '\b';
                break;
            case 'f':
                buf[w++] = '\f';
                break;
            case 'n':
                buf[w++] = '\n';
                break;
            case 'r':
                buf[w++] = '\r';
                break;
            case 't':
                buf[w++] = '\t';
                break;
            case 'u': {
                if (q + 6 > end) {
                    ok = 0;
                    break;
                }
                int h0 = hexval(q[2]), h1 = hexval(q[3]), h2 = hexval(q[4]), h3 = hexval(q[5]);
                if (h0 < 0 || h1 < 0 || h2 < 0 || h3 < 0) {
                    ok = 0;
                    break;
                }
                unsigned int cp = (unsigned int)((h0 << 12) | (h1 << 8) | (h2 << 4) | h3);
                if (cp >= 0xD800 && cp <= 0xDFFF) {
                    ok = 0; /* surrogates: the Python path's (spec 6.4) */
                    break;
                }
                if (cp < 0x80) {
                    buf[w++] = (unsigned char)cp;
                }
                else if (cp < 0x800) {
                    buf[w++] = (unsigned char)(0xC0 | (cp >> 6));
                    buf[w++] = (unsigned char)(0x80 | (cp & 0x3F));
                }
                else {
                    buf[w++] = (unsigned char)(0xE0 | (cp >> 12));
                    buf[w++] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
                    buf[w++] = (unsigned char)(0x80 | (cp & 0x3F));
                }
                q += 4;
                break;
            }
            default:
                ok = 0;
            }
            if (!ok) {
                break;
            }
            q += 2;
        }
        out = ok ? PyUnicode_DecodeUTF8((const char *)buf, w, NULL) : NULL;
        if (buf != small) {
            PyMem_Free(buf);
        }
    }
    if (out == NULL && PyErr_Occurred() && PyErr_ExceptionMatches(PyExc_UnicodeDecodeError)) {
        PyErr_Clear(); /* not UTF-8: the Python path's error */
    }
    return out;
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
        PyObject *parts = PyObject_GetAttrString(block, "parts");
        if (parts == NULL) {
            Py_DECREF(tail);
            Py_DECREF(prefix);
            return NULL;
        }
        PyObject *size_obj = PyObject_GetAttrString(block, "size");
        if (size_obj == NULL) {
            Py_DECREF(parts);
            Py_DECREF(tail);
            Py_DECREF(prefix);
            return NULL;
        }
        Py_ssize_t size = PyLong_AsSsize_t(size_obj);
        Py_DECREF(size_obj);
        if ((size == -1 && PyErr_Occurred()) || !PyList_Check(parts)) {
            Py_DECREF(parts);
            Py_DECREF(tail);
            Py_DECREF(prefix);
            return NULL;
        }
        Entry *entry = &entries[(*count)++];
        entry->prefix = prefix;
        entry->tail = tail;
        Py_INCREF(block);
        entry->block = block;
        entry->parts = parts;
        entry->size = size;
        entry->dirty = 0;
        return entry;
    }
    return NULL;
}

/* Write the sizes back and release the table; -1 when a write failed (an error is set). */
static int
release(Entry *entries, int count)
{
    int status = 0;
    for (int e = 0; e < count; e++) {
        if (entries[e].dirty && status == 0) {
            PyObject *size = PyLong_FromSsize_t(entries[e].size);
            if (size == NULL || PyObject_SetAttrString(entries[e].block, "size", size) < 0) {
                status = -1;
            }
            Py_XDECREF(size);
        }
        Py_DECREF(entries[e].prefix);
        Py_DECREF(entries[e].tail);
        Py_DECREF(entries[e].block);
        Py_DECREF(entries[e].parts);
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
    unsigned char small[SMALL_BUF];
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
        PyObject *delta = decode_string(s + plen, n - plen - tlen, small);
        if (delta == NULL) {
            if (PyErr_Occurred()) {
                release(entries, count);
                return NULL;
            }
            break;
        }
        Py_ssize_t size = PyUnicode_GET_LENGTH(delta);
        if (entry->size + size > max_size) {
            Py_DECREF(delta);
            break;
        }
        if (size) {
            if (PyList_Append(entry->parts, delta) < 0) {
                Py_DECREF(delta);
                release(entries, count);
                return NULL;
            }
            entry->size += size;
            entry->dirty = 1;
        }
        Py_DECREF(delta);
    }
    if (release(entries, count) < 0) {
        return NULL;
    }
    return PyLong_FromSsize_t(i);
}

/* Whether s[0:n] is UTF-8 as Python's strict decoder reads it (no overlong form, no
 * surrogate, nothing past U+10FFFF, no sequence cut short), without building the str. */
static int
utf8_ok(const unsigned char *s, Py_ssize_t n)
{
    Py_ssize_t i = 0;
    while (i < n) {
        /* ASCII, eight bytes at a time while aligned runs last */
        while (i + 8 <= n) {
            uint64_t word;
            memcpy(&word, s + i, 8);
            if (word & 0x8080808080808080ULL) {
                break;
            }
            i += 8;
        }
        if (i >= n) {
            break;
        }
        unsigned char c = s[i];
        if (c < 0x80) {
            i++;
            continue;
        }
        if (c < 0xC2) {
            return 0; /* a continuation byte first, or an overlong two-byte form */
        }
        if (c < 0xE0) {
            if (i + 1 >= n || (s[i + 1] & 0xC0) != 0x80) {
                return 0;
            }
            i += 2;
            continue;
        }
        if (c < 0xF0) {
            if (i + 2 >= n) {
                return 0;
            }
            unsigned char c1 = s[i + 1];
            unsigned char lo = c == 0xE0 ? 0xA0 : 0x80; /* no overlong form */
            unsigned char hi = c == 0xED ? 0x9F : 0xBF; /* no surrogate */
            if (c1 < lo || c1 > hi || (s[i + 2] & 0xC0) != 0x80) {
                return 0;
            }
            i += 3;
            continue;
        }
        if (c < 0xF5) {
            if (i + 3 >= n) {
                return 0;
            }
            unsigned char c1 = s[i + 1];
            unsigned char lo = c == 0xF0 ? 0x90 : 0x80; /* no overlong form */
            unsigned char hi = c == 0xF4 ? 0x8F : 0xBF; /* nothing past U+10FFFF */
            if (c1 < lo || c1 > hi || (s[i + 2] & 0xC0) != 0x80 || (s[i + 3] & 0xC0) != 0x80) {
                return 0;
            }
            i += 4;
            continue;
        }
        return 0;
    }
    return 1;
}

static PyObject *
is_utf8(PyObject *self, PyObject *arg)
{
    (void)self;
    if (!PyBytes_Check(arg)) {
        PyErr_SetString(PyExc_TypeError, "is_utf8(bytes)");
        return NULL;
    }
    return PyBool_FromLong(utf8_ok((const unsigned char *)PyBytes_AS_STRING(arg), PyBytes_GET_SIZE(arg)));
}

static PyMethodDef methods[] = {
    {"is_utf8", (PyCFunction)is_utf8, METH_O,
     "is_utf8(data) -> bool\n\nWhether data is UTF-8 as bytes.decode('utf-8') reads it, without decoding."},
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
