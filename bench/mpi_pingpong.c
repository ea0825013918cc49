/* mpi_pingpong: small-message latency and message rate between two MPI ranks.
 *
 * Usage: mpirun -n 2 mpi_pingpong [ROUND_TRIPS [MESSAGES]]  (defaults 20000 and 200000)
 * Latency: rank 0 sends 8 bytes with MPI_Send and waits for them back with MPI_Recv,
 * ROUND_TRIPS times (after 200 for warming up); one-way latency = time / (2 x round trips).
 * Rate: rank 0 sends MESSAGES 8-byte messages with MPI_Isend in windows of 64 (MPI_Waitall
 * each window), rank 1 receives them with MPI_Irecv, then sends one acknowledgement; rate =
 * messages / time. Rank 0 prints "latency_us=L rate_msgs_per_s=R checksum=C", where C is
 * the sum of the values received back (a check that the exchange happened).
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#define WINDOW 64

static long long ping_pong(int rank, int round_trips)
{
    long long value = 0, sum = 0;
    for (int trip = 0; trip < round_trips; trip++) {
        if (rank == 0) {
            value = trip;
            MPI_Send(&value, 1, MPI_LONG_LONG, 1, 0, MPI_COMM_WORLD);
            MPI_Recv(&value, 1, MPI_LONG_LONG, 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            sum += value;
        } else {
            MPI_Recv(&value, 1, MPI_LONG_LONG, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            MPI_Send(&value, 1, MPI_LONG_LONG, 0, 0, MPI_COMM_WORLD);
        }
    }
    return sum;
}

static void stream(int rank, int messages)
{
    long long values[WINDOW] = {0};
    MPI_Request requests[WINDOW];
    MPI_Status statuses[WINDOW];
    for (int sent = 0; sent < messages; sent += WINDOW) {
        for (int slot = 0; slot < WINDOW; slot++) {
            if (rank == 0)
                MPI_Isend(&values[slot], 1, MPI_LONG_LONG, 1, 1, MPI_COMM_WORLD, &requests[slot]);
            else
                MPI_Irecv(&values[slot], 1, MPI_LONG_LONG, 0, 1, MPI_COMM_WORLD, &requests[slot]);
        }
        MPI_Waitall(WINDOW, requests, statuses);
    }
    long long acknowledgement = 0;
    if (rank == 0)
        MPI_Recv(&acknowledgement, 1, MPI_LONG_LONG, 1, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    else
        MPI_Send(&acknowledgement, 1, MPI_LONG_LONG, 0, 2, MPI_COMM_WORLD);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    int round_trips = argc > 1 ? atoi(argv[1]) : 20000;
    int messages = argc > 2 ? atoi(argv[2]) : 200000;
    messages -= messages % WINDOW;

    ping_pong(rank, 200);
    MPI_Barrier(MPI_COMM_WORLD);
    double start = MPI_Wtime();
    long long checksum = ping_pong(rank, round_trips);
    double latency = (MPI_Wtime() - start) / (2.0 * round_trips);

    MPI_Barrier(MPI_COMM_WORLD);
    start = MPI_Wtime();
    stream(rank, messages);
    double rate = messages / (MPI_Wtime() - start);

    if (rank == 0)
        printf("latency_us=%.3f rate_msgs_per_s=%.0f checksum=%lld\n", latency * 1e6, rate,
               checksum);
    MPI_Finalize();
    return 0;
}
