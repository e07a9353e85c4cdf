/* envelope._cescape: escape a str as a JSON string body straight into its framed lines.
 *
 * One function, escape_lines(text, budget, last_budget, opening, last_opening, close),
 * gives exactly what the pure-Python reference gives:
 *
 *     _chunker.cut_lines(_chunker.escape(text), budget, last_budget,
 *                        opening, last_opening, close)
 *
 * byte for byte (spec 6.1, 6.2), in one pass over the text's UTF-8, writing each escaped
 * piece once, into the bytes object of its own line. The reference escapes the whole
 * payload with msgspec and then copies each piece out into its line; on a 10 MiB
 * escape-heavy payload that second copy alone cost about half of msgspec's own encode
 * (issue 31, docs/benchmarks.md).
 *
 * The escaping is msgspec's JSON string escaping (a test compares every code point class
 * with msgspec): '"' and '\\' and the controls \b \t \n \f \r get their two-byte forms,
 * the other bytes below 0x20 get \u00XX with lowercase hex, everything else (DEL,
 * U+2028, U+2029, every non-ASCII character) is raw UTF-8.
 *
 * The cut rule, on the escaped bytes: a legal cut is a boundary between escape units,
 * where a unit is one escaped ASCII character (1, 2 or 6 bytes) or one non-ASCII
 * character (its 2 to 4 UTF-8 bytes). While the rest of the escaped body is longer than
 * last_budget, the next piece is the longest run of whole units within budget (the
 * largest legal cut at or before start + budget, which is what _chunker._legal_cut
 * finds); the rest is the last piece. Bytes are escaped one at a time (an escape is
 * written whole, by its one byte); when the next byte does not fit and is the middle of
 * a character, the bytes of that character already written are taken back. Whether the
 * rest fits last_budget is known without a counting pass over the whole text: it cannot
 * while more than last_budget UTF-8 bytes remain (each byte escapes to at least one),
 * and once fewer remain their escaped size is counted once, over that short tail, and
 * kept up to date.
 *
 * A str holding a lone surrogate has no UTF-8: escape_lines returns None and the caller
 * takes the Python path, which raises the EncodeError that names the index (spec 6.4).
 */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

/* For each byte: its escaped form, padded to 8 bytes (a raw byte is itself; '"' is \"; a
 * control without a short form is \u00xx), and that form's length (1, 2 or 6). Bytes of
 * 0x80 and above are raw: non-ASCII characters are copied as their UTF-8 bytes. Each byte
 * is written as a whole 8-byte store and the output advances by its length: no branch per
 * byte, which on escape-heavy text (about one character in two escaped) would mispredict
 * about as often as not. Every buffer written so has ESCAPE_SLACK spare bytes past its end. */
static uint64_t FORM[256];
static unsigned char LEN[256];
#define ESCAPE_SLACK 8

static void
set_form(int c, const char *form, size_t len)
{
    char padded[8] = {0};
    memcpy(padded, form, len);
    memcpy(&FORM[c], padded, 8);
    LEN[c] = (unsigned char)len;
}

static void
init_tables(void)
{
    static const char HEX[] = "0123456789abcdef";
    char form[6];
    int c;
    for (c = 0; c < 256; c++) {
        form[0] = (char)c;
        set_form(c, form, 1);
    }
    for (c = 0; c < 0x20; c++) {
        memcpy(form, "\\u00", 4);
        form[4] = HEX[c >> 4];
        form[5] = HEX[c & 0xF];
        set_form(c, form, 6);
    }
    set_form('"', "\\\"", 2);
    set_form('\\', "\\\\", 2);
    set_form('\b', "\\b", 2);
    set_form('\t', "\\t", 2);
    set_form('\n', "\\n", 2);
    set_form('\f', "\\f", 2);
    set_form('\r', "\\r", 2);
}

/* The escaped size of s[0:n]. */
static Py_ssize_t
escaped_size(const unsigned char *s, Py_ssize_t n)
{
    Py_ssize_t size = 0, i;
    for (i = 0; i < n; i++) {
        size += LEN[s[i]];
    }
    return size;
}

/* Escape the whole rest s[*at:n] into out (exactly its escaped size, plus slack). */
static Py_ssize_t
fill_rest(const unsigned char *s, Py_ssize_t n, Py_ssize_t *at, char *out)
{
    char *o = out;
    Py_ssize_t i;
    for (i = *at; i < n; i++) {
        unsigned char c = s[i];
        memcpy(o, &FORM[c], 8);
        o += LEN[c];
    }
    *at = n;
    return o - out;
}

/* Escape whole units from s[*at:] into out while they fit `room`, which the rest's
 * escaped size exceeds (so the input never runs out first); advances *at. */
static Py_ssize_t
fill_piece(const unsigned char *s, Py_ssize_t *at, char *out, Py_ssize_t room)
{
    const unsigned char *p = s + *at;
    char *o = out;
    char *const end = out + room;
    char *const safe = end - 6; /* any byte's form fits while o <= safe */
    while (o <= safe) {
        unsigned char c = *p++;
        memcpy(o, &FORM[c], 8);
        o += LEN[c];
    }
    for (;;) {
        unsigned char c = *p;
        if (LEN[c] > end - o) {
            break;
        }
        memcpy(o, &FORM[c], 8);
        o += LEN[c];
        p++;
    }
    /* A cut inside a character: take back its bytes already written (one each). */
    if ((*p & 0xC0) == 0x80) {
        do {
            p--;
            o--;
        } while ((*p & 0xC0) == 0x80);
    }
    *at = p - s;
    return o - out;
}

/* A new line: prefix, then escaped units taken from s at *at (the whole rest when `last`,
 * whose escaped size is then `room`; else as many as fit `room`), then close. NULL with
 * an exception set on failure. */
static PyObject *
make_line(const unsigned char *s, Py_ssize_t n, Py_ssize_t *at, Py_ssize_t room, int last, const char *prefix,
          Py_ssize_t prefix_len, const char *close, Py_ssize_t close_len, Py_ssize_t *written)
{
    PyObject *line = PyBytes_FromStringAndSize(NULL, prefix_len + room + close_len + ESCAPE_SLACK);
    char *buf;
    Py_ssize_t got;
    if (line == NULL) {
        return NULL;
    }
    buf = PyBytes_AS_STRING(line);
    memcpy(buf, prefix, (size_t)prefix_len);
    got = last ? fill_rest(s, n, at, buf + prefix_len) : fill_piece(s, at, buf + prefix_len, room);
    memcpy(buf + prefix_len + got, close, (size_t)close_len);
    if (_PyBytes_Resize(&line, prefix_len + got + close_len) < 0) {
        return NULL; /* line was freed */
    }
    *written = got;
    return line;
}

/* Append a new line to lines, taking its reference; -1 (an exception set) if it is NULL or the append fails. */
static int
append_line(PyObject *lines, PyObject *line)
{
    int failed;
    if (line == NULL) {
        return -1;
    }
    failed = PyList_Append(lines, line);
    Py_DECREF(line);
    return failed;
}

static PyObject *
escape_lines(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    PyObject *text, *lines = NULL, *line;
    Py_ssize_t budget, last_budget, n, at = 0, rest = -1, got;
    const unsigned char *s;
    const char *opening, *last_opening, *close;
    Py_ssize_t opening_len, last_opening_len, close_len;
    (void)module;

    if (nargs != 6) {
        PyErr_Format(PyExc_TypeError, "escape_lines() takes 6 positional arguments (%zd given)", nargs);
        return NULL;
    }
    text = args[0];
    if (!PyUnicode_Check(text)) {
        PyErr_Format(PyExc_TypeError, "escape_lines() text must be str, not %.100s", Py_TYPE(text)->tp_name);
        return NULL;
    }
    budget = PyNumber_AsSsize_t(args[1], PyExc_OverflowError);
    if (budget == -1 && PyErr_Occurred()) {
        return NULL;
    }
    last_budget = PyNumber_AsSsize_t(args[2], PyExc_OverflowError);
    if (last_budget == -1 && PyErr_Occurred()) {
        return NULL;
    }
    if (budget < 6 || last_budget < budget) {
        PyErr_SetString(PyExc_ValueError, "budget must be >= 6 and last_budget >= budget");
        return NULL;
    }
    if (!PyBytes_Check(args[3]) || !PyBytes_Check(args[4]) || !PyBytes_Check(args[5])) {
        PyErr_SetString(PyExc_TypeError, "escape_lines() opening, last_opening and close must be bytes");
        return NULL;
    }
    opening = PyBytes_AS_STRING(args[3]);
    opening_len = PyBytes_GET_SIZE(args[3]);
    last_opening = PyBytes_AS_STRING(args[4]);
    last_opening_len = PyBytes_GET_SIZE(args[4]);
    close = PyBytes_AS_STRING(args[5]);
    close_len = PyBytes_GET_SIZE(args[5]);

    s = (const unsigned char *)PyUnicode_AsUTF8AndSize(text, &n);
    if (s == NULL) {
        if (PyErr_ExceptionMatches(PyExc_UnicodeEncodeError)) {
            PyErr_Clear();
            Py_RETURN_NONE; /* a lone surrogate: the caller's Python path raises the error */
        }
        return NULL;
    }
    lines = PyList_New(0);
    if (lines == NULL) {
        return NULL;
    }
    for (;;) {
        if (rest < 0 && n - at <= last_budget) {
            /* Few enough bytes left that they might fit last_budget: count them, once. */
            rest = escaped_size(s + at, n - at);
        }
        if (rest >= 0 && rest <= last_budget) {
            line = make_line(s, n, &at, rest, 1, last_opening, last_opening_len, close, close_len, &got);
            if (append_line(lines, line) < 0) {
                goto error;
            }
            if (at != n || got != rest) {
                PyErr_SetString(PyExc_SystemError, "escape_lines: the last piece did not take the rest");
                goto error;
            }
            return lines;
        }
        line = make_line(s, n, &at, budget, 0, opening, opening_len, close, close_len, &got);
        if (append_line(lines, line) < 0) {
            goto error;
        }
        if (rest >= 0) {
            rest -= got;
        }
    }
error:
    Py_XDECREF(lines);
    return NULL;
}

static PyMethodDef methods[] = {
    {"escape_lines", (PyCFunction)(void (*)(void))escape_lines, METH_FASTCALL,
     "escape_lines(text, budget, last_budget, opening, last_opening, close) -> list[bytes] | None\n\n"
     "cut_lines(escape(text), ...) in one pass; None when text holds a lone surrogate."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT,
    "envelope._cescape",
    "Escape a str as a JSON string body straight into its framed lines (see _cescape.pyi).",
    -1,
    methods,
    NULL,
    NULL,
    NULL,
    NULL,
};

PyMODINIT_FUNC
PyInit__cescape(void)
{
    init_tables();
    return PyModule_Create(&module_def);
}
