# Word and word-pair frequencies of a text, and the number of distinct lines
# once their words are sorted, counted by several Perl threads (ithreads: one
# interpreter each, truly parallel). Every thread reads and splits the whole
# text but counts only the keys of its own partition (a checksum of the key's
# bytes modulo the thread count), ranks them, and returns its distinct counts
# and its 10 most frequent keys; the main thread merges those short lists.
# usage: perl wordstats.pl TEXT THREADS      (output format: see wordstats.rb)
use strict;
use warnings;
use threads;

my ($path, $nthreads) = @ARGV;
die "usage: perl wordstats.pl TEXT THREADS\n" unless defined $nthreads && $nthreads >= 1;

sub by_rank { my ($h) = @_; return sub { $h->{$b} <=> $h->{$a} || $a cmp $b } }

# The 10 most frequent keys of a hash, as [key, count] pairs.
sub top {
    my ($h) = @_;
    my $order = by_rank($h);
    my @keys = sort $order keys %$h;
    return [ map { [ $_, $h->{$_} ] } @keys[0 .. ($#keys < 9 ? $#keys : 9)] ];
}

sub count_part {
    my ($part) = @_;
    my (%words, %pairs, %shapes);
    my ($lines, $total) = (0, 0);
    my $mine = sub { unpack('%32C*', $_[0]) % $nthreads == $part };
    open(my $in, '<', $path) or die "$path: $!\n";
    while (my $line = <$in>) {
        my @w = split ' ', $line;
        $lines++;
        $total += @w;
        for my $i (0 .. $#w) {
            $words{$w[$i]}++ if $mine->($w[$i]);
            next unless $i;
            my $pair = "$w[$i - 1] $w[$i]";
            $pairs{$pair}++ if $mine->($pair);
        }
        my $shape = join(',', sort @w);
        $shapes{$shape}++ if $mine->($shape);
    }
    close $in;
    my @result = ($lines, $total, scalar(keys %words), scalar(keys %pairs), scalar(keys %shapes),
                  top(\%words), top(\%pairs));
    # Freed here, in parallel: what a thread still holds is freed by its join, one at a time.
    undef %words;
    undef %pairs;
    undef %shapes;
    return @result;
}

my @workers = map { threads->create({ context => 'list' }, \&count_part, $_) } 0 .. $nthreads - 1;
my ($lines, $total, $distinct, $npairs, $nshapes) = (0, 0, 0, 0, 0);
my (%top_words, %top_pairs);
for my $worker (@workers) {
    my ($l, $t, $d, $p, $s, $w, $q) = $worker->join();
    ($lines, $total) = ($l, $t);
    ($distinct, $npairs, $nshapes) = ($distinct + $d, $npairs + $p, $nshapes + $s);
    $top_words{ $_->[0] } = $_->[1] for @$w;
    $top_pairs{ $_->[0] } = $_->[1] for @$q;
}

print "lines $lines\nwords $total\ndistinct $distinct\npairs $npairs\nshapes $nshapes\n";
print "word $_->[0] $_->[1]\n" for @{ top(\%top_words) };
print "pair $_->[0] $_->[1]\n" for @{ top(\%top_pairs) };
