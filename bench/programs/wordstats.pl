# Word and word-pair frequencies of a text, counted by several Perl threads
# (ithreads: one interpreter each, truly parallel). Thread t counts the lines
# whose index is t modulo the thread count; the main thread merges the hashes.
# usage: perl wordstats.pl TEXT THREADS      (output format: see wordstats.rb)
use strict;
use warnings;
use threads;

my ($path, $nthreads) = @ARGV;
die "usage: perl wordstats.pl TEXT THREADS\n" unless defined $nthreads && $nthreads >= 1;

sub count_part {
    my ($part) = @_;
    my (%words, %pairs, %shapes);
    my ($lines, $total) = (0, 0);
    open(my $in, '<', $path) or die "$path: $!\n";
    my $index = 0;
    while (my $line = <$in>) {
        next if $index++ % $nthreads != $part;
        my @w = split ' ', $line;
        $lines++;
        $total += @w;
        $words{$_}++ for @w;
        $pairs{"$w[$_ - 1] $w[$_]"}++ for 1 .. $#w;
        $shapes{join(',', sort @w)}++;
    }
    close $in;
    return ($lines, $total, \%words, \%pairs, \%shapes);
}

my @workers = map { threads->create({ context => 'list' }, \&count_part, $_) } 0 .. $nthreads - 1;
my (%words, %pairs, %shapes);
my ($lines, $total) = (0, 0);
for my $worker (@workers) {
    my ($l, $t, $w, $p, $s) = $worker->join();
    $lines += $l;
    $total += $t;
    $words{$_} += $w->{$_} for keys %$w;
    $pairs{$_} += $p->{$_} for keys %$p;
    $shapes{$_} += $s->{$_} for keys %$s;
}

sub top {
    my ($h, $label) = @_;
    my @keys = sort { $h->{$b} <=> $h->{$a} || $a cmp $b } keys %$h;
    print "$label $_ $h->{$_}\n" for @keys[0 .. ($#keys < 9 ? $#keys : 9)];
}

print "lines $lines\nwords $total\ndistinct ", scalar(keys %words), "\npairs ", scalar(keys %pairs), "\nshapes ", scalar(keys %shapes), "\n";
top(\%words, 'word');
top(\%pairs, 'pair');
