# tests/wall/probe.sh - bash, run inside a sandbox (through sandboxctl exec,
# as `bash -c "$(cat probe.sh)" probe WAIT SPEC...`) or in a namespace of
# the wall test: tries every SPEC at once, each for at most WAIT seconds,
# and prints one line "SPEC RC" per SPEC (RC 0: reached, else not).
#   tcp:ADDR:PORT   a TCP connection is accepted
#   udpdns:ADDR     a DNS query over UDP to ADDR:53 gets its answer
#   tcpdns:ADDR     the same over TCP
# Only bash (/dev/tcp, /dev/udp), timeout, head and od: what any image has.
wait_s=$1
shift
# The query: id 0x5741, recursion desired, one question allowed.test A IN.
q='\x57\x41\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00\x07allowed\x04test\x00\x00\x01\x00\x01'
one() {
    local spec=$1 a
    case $spec in
    tcp:*)
        a=${spec#tcp:}
        timeout "$wait_s" bash -c 'exec 3<>"/dev/tcp/$0/$1"' "${a%:*}" "${a##*:}" 2>/dev/null
        ;;
    udpdns:*)
        timeout "$wait_s" bash -c 'exec 3<>"/dev/udp/$0/53" && printf "$1" >&3 &&
            [ "$(head -c 2 <&3 | od -An -tx1 | tr -d " \n")" = 5741 ]' "${spec#udpdns:}" "$q" 2>/dev/null
        ;;
    tcpdns:*)
        timeout "$wait_s" bash -c 'exec 3<>"/dev/tcp/$0/53" && printf "\x00\x1e$1" >&3 &&
            [ "$(head -c 4 <&3 | od -An -tx1 | tr -d " \n" | cut -c5-8)" = 5741 ]' "${spec#tcpdns:}" "$q" 2>/dev/null
        ;;
    *) return 99 ;;
    esac
}
for spec in "$@"; do
    (
        one "$spec"
        echo "$spec $?"
    ) &
done
wait
