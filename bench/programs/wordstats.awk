# Word and word-pair frequencies of a text, with gawk associative arrays.
# usage: LC_ALL=C gawk -f wordstats.awk TEXT      (output format: see wordstats.rb)
{
    lines++
    total += NF
    for (i = 1; i <= NF; i++) {
        words[$i]++
        if (i > 1)
            pairs[$(i - 1) " " $i]++
        line[i] = $i
    }
    n = asort(line)
    shape = line[1]
    for (i = 2; i <= n; i++)
        shape = shape "," line[i]
    shapes[shape]++
    delete line
}

function by_count(i1, v1, i2, v2) {
    if (v1 != v2)
        return v2 - v1
    return i1 < i2 ? -1 : (i1 > i2)
}

function top(counts, label,    key, n) {
    PROCINFO["sorted_in"] = "by_count"
    n = 0
    for (key in counts) {
        if (++n > 10)
            break
        print label, key, counts[key]
    }
}

END {
    print "lines", lines + 0
    print "words", total + 0
    print "distinct", length(words)
    print "pairs", length(pairs)
    print "shapes", length(shapes)
    top(words, "word")
    top(pairs, "pair")
}
